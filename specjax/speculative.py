"""One speculative-decoding operating point: step times, speedup, throughputs, memory (MODEL.md 2).

T_sd(B) = k * T_draft(B, 1) + T_target(B, k+1), where a draft pass is the draft model's own
pass plus c * T_target(B, 1) (c = `draft_cost_ratio`; 0 for model drafters, the whole cost for
the cost-ratio drafter). S(B) = tau * T_target(B, 1) / T_sd(B). With everything memory-bound and
a ratio drafter this is Leviathan's (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)).
`step` is a pure function of one point; vmap/jit it in callers.
"""

from typing import NamedTuple

import jax.numpy as jnp

from ._pytree import pytree_dataclass
from .acceptance import tokens_per_step
from .roofline import effective_context, pass_cost

# Point status codes (int column `status` in result grids).
STATUS = {0: "ok", 1: "sd_over_memory", 2: "base_over_memory", 3: "model_does_not_fit"}


@pytree_dataclass
class Decode:
    """Operating point of the serving deployment (all leaves).

    Attributes:
      batch: decode batch B (sequences), >= 1, may be real in kernels.
      k: draft length (tokens proposed per step), >= 0, may be real.
      alpha: per-token acceptance rate in [0, 1].
      context: tokens already in each sequence's KV cache (L).
      tp: tensor-parallel degree t (GPUs per replica).
      draft_cost_ratio: c, extra draft-pass cost as a fraction of T_target(B, 1).
      memory_fraction: usable fraction u of HBM (default 0.9).
    """

    batch: float
    k: float
    alpha: float
    context: float
    tp: float = 1.0
    draft_cost_ratio: float = 0.0
    memory_fraction: float = 0.9


class Result(NamedTuple):
    """Outputs of `step` (seconds, tokens/s, sequences)."""

    speedup: float
    tokens_per_step: float
    alpha: float
    t_target_s: float        # plain decode pass T_target(B, 1)
    t_draft_s: float         # one draft pass
    t_verify_s: float        # T_target(B, k+1)
    t_sd_step_s: float       # k * t_draft + t_verify
    throughput_base_tok_s: float
    throughput_sd_tok_s: float
    max_batch_base: float
    max_batch_sd: float
    feasible: float          # 1.0 if the batch fits in memory with the drafter
    verify_compute_bound: float
    status: float


def kv_bytes_per_seq(model, tokens):
    """KV-cache bytes one sequence of `tokens` tokens stores (windowed layers keep min(L, w))."""
    per_layer = model.kv_elems_per_tok * model.b_kv
    windowed = effective_context(tokens, model.window)
    return per_layer * (model.n_full_layers * tokens + model.n_window_layers * windowed)


def max_batch(hw, models, tokens, tp, memory_fraction):
    """Largest whole batch whose weights + KV fit in t*C*u; 0 if the weights alone do not fit."""
    budget = tp * hw.hbm_bytes * memory_fraction
    weights = sum(m.weight_bytes for m in models)
    per_seq = sum(kv_bytes_per_seq(m, tokens) for m in models)
    free = budget - weights
    safe = jnp.where(per_seq > 0, per_seq, 1.0)
    return jnp.where(free > 0, jnp.where(per_seq > 0, jnp.floor(free / safe), jnp.inf), 0.0)


def step(hw, target, draft, dec, mode="operator"):
    """Evaluate speculative decoding at one operating point.

    Args:
      hw: `Hardware`. target, draft: `Model` (draft = `Model.zeros()` for n-gram / ratio drafters).
      dec: `Decode`. mode: "operator" or "pass" roofline (static).

    Returns:
      `Result`. speedup = tau * T_target(B,1) / (k T_draft(B,1) + T_target(B,k+1)).

    Examples:
      >>> import jax.numpy as jnp
      >>> from specjax import hardware, models
      >>> hw = hardware.load("h200").resolve("bf16")
      >>> tgt = models.target(models.load_architecture("llama-3-70b"), kv_dtype="fp8")
      >>> dec = Decode(batch=1.0, k=2.0, alpha=0.814, context=2048.0, draft_cost_ratio=0.145)
      >>> r = step(hw, tgt, models.Model.zeros(), dec, mode="pass")
      >>> print(f"{float(r.speedup):.2f}")
      1.92
    """
    tau = tokens_per_step(dec.alpha, dec.k)
    base = pass_cost(target, hw, dec.batch, 1.0, dec.context, dec.tp, mode)
    verify = pass_cost(target, hw, dec.batch, dec.k + 1.0, dec.context, dec.tp, mode)
    own = pass_cost(draft, hw, dec.batch, 1.0, dec.context, dec.tp, mode)
    t_draft = own.t_s + dec.draft_cost_ratio * base.t_s
    t_sd = dec.k * t_draft + verify.t_s
    speedup = tau * base.t_s / t_sd
    mb_base = max_batch(hw, (target,), dec.context + 1.0, dec.tp, dec.memory_fraction)
    mb_sd = max_batch(hw, (target, draft), dec.context + dec.k + 1.0, dec.tp, dec.memory_fraction)
    status = jnp.where(mb_base < 1, 3.0, jnp.where(dec.batch > mb_base, 2.0, jnp.where(dec.batch > mb_sd, 1.0, 0.0)))
    return Result(
        speedup=speedup, tokens_per_step=tau, alpha=jnp.asarray(dec.alpha, speedup.dtype), t_target_s=base.t_s,
        t_draft_s=t_draft, t_verify_s=verify.t_s, t_sd_step_s=t_sd,
        throughput_base_tok_s=dec.batch / base.t_s,
        throughput_sd_tok_s=dec.batch * tau / t_sd, max_batch_base=mb_base, max_batch_sd=mb_sd,
        feasible=(status == 0).astype(speedup.dtype), verify_compute_bound=verify.compute_bound,
        status=status)
