"""One speculative-decoding operating point: step times, speedup, throughputs, memory (docs/model.md §5, §6).

T_sd(B) = k * (T_draft(B, 1) + T_draft_fixed) + T_target(B, k+1) + T_step_fixed for a chain drafter, and
p * (T_draft(B, k) + T_draft_fixed) + T_target(B, k+1) + T_step_fixed for a parallel drafter (docs/model.md §5.2:
p passes, each over the B x k draft tokens), where a draft pass
is the draft model's own pass (in the drafter's layout, `Deployment.drafter`) plus c * T_target(B, 1)
(c = `draft_cost_ratio`; 0 for model drafters, the whole cost for the cost-ratio drafter); T_draft_fixed
applies to drafters that run a model (not n-gram lookup, not the ratio drafter, whose c already is the
whole draft cost) and T_step_fixed to every step with k > 0 (docs/model.md §5.2).
S(B) = tau * T_target(B, 1) / T_sd(B). With everything memory-bound and a ratio drafter this is
Leviathan's (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)).
`step` is a pure function of one point; vmap/jit it in callers.
"""

from typing import NamedTuple

import jax.numpy as jnp

from .acceptance import tokens_from_rates, tokens_per_step, tokens_per_tree_step
from .memory import kv_bytes_per_seq, max_batch
from .roofline import pass_cost
from .status import Point, code
from .trees import Decode, Deployment

__all__ = ["Decode", "Deployment", "Result", "step", "times", "kv_bytes_per_seq", "max_batch", "point_status"]


class Result(NamedTuple):
    """Outputs of `step` (seconds, tokens/s, sequences)."""

    speedup: float
    tokens_per_step: float
    alpha: float
    t_target_s: float        # plain decode pass T_target(B, 1)
    t_draft_s: float         # one draft pass (a parallel drafter's: one pass over B x k tokens)
    t_verify_s: float        # T_target(B, k+1)
    t_sd_step_s: float       # k * t_draft + t_verify (a parallel drafter: p * t_draft + t_verify)
    throughput_base_tok_s: float
    throughput_sd_tok_s: float
    max_batch_base: float
    max_batch_sd: float
    feasible: float          # 1.0 if the batch fits in memory with the drafter
    verify_compute_bound: float
    status: int              # a `status.Point` code (int8)


def tokens_per_tree_or_chain(dec):
    """tau of the operating point: i.i.d. alpha or the per-position vector (docs/model.md §4.3), through the
    tree estimate for a draft tree (docs/model.md §4.4; a topk-1 tree with k + 1 tokens is the chain, exactly)."""
    chain = tokens_per_step(dec.alpha, dec.k) if dec.rates is None else tokens_from_rates(dec.rates, dec.k)
    if not dec.is_tree:
        return chain
    tree = tokens_per_tree_step(dec.rate_at, dec.tree_topk, dec.tree_tokens, dec.k, dec.tree_max_depth)
    return jnp.where(dec.tree_is_chain, chain, tree)


def point_status(batch, mb_base, mb_sd):
    """`status.Point` code of a batch given the memory-feasible batches without and with the drafter."""
    return jnp.where(mb_base < 1, code(Point.MODEL_DOES_NOT_FIT),
                     jnp.where(batch > mb_base, code(Point.BASE_OVER_MEMORY),
                               jnp.where(batch > mb_sd, code(Point.SD_OVER_MEMORY), code(Point.OK))))


def times(hw, deploy, target, draft, dec):
    """The times of one step without the memory side (docs/model.md §5.2): (tau, plain pass `PassCost`, verify
    `PassCost`, one draft pass t_draft, the speculative step T_sd). `step` adds speedup and memory;
    the serving solver (`search.serving`) calls this in its inner loop."""
    tau = tokens_per_tree_or_chain(dec)
    lam = dec.expert_locality
    q_verify = dec.verify_tokens
    base = pass_cost(hw, deploy, target, dec.batch, 1.0, dec.context, lam)
    verify = pass_cost(hw, deploy, target, dec.batch, q_verify, dec.context, lam)
    draft_layout = deploy.drafter()
    draft_ctx = dec.draft_context(dec.context)  # a bounded draft KV cache (docs/model.md §5.2)
    own = pass_cost(hw, draft_layout, draft, dec.batch, 1.0, draft_ctx, lam)
    fixed = dec.draft_cost_ratio * base.t_s + jnp.where(draft.has_weights, hw.draft_overhead_s, 0.0)
    t_draft = own.t_s + fixed
    if dec.is_tree:  # the first draft pass over B tokens, the other k - 1 over B x topk (docs/model.md §5.2)
        wide = pass_cost(hw, draft_layout, draft, dec.batch, dec.tree_topk, draft_ctx, lam).t_s + fixed
        drafting = dec.k * wide + (t_draft - wide)  # = k t_draft exactly for topk 1
        t_draft = drafting / jnp.maximum(dec.k, 1.0)
    else:
        drafting = dec.k * t_draft
    if dec.is_parallel:  # p passes over B x k tokens each, T_draft_fixed per pass (docs/model.md §5.2)
        block = pass_cost(hw, draft_layout, draft, dec.batch, dec.k, draft_ctx, lam).t_s + fixed
        par = dec.draft_passes > 0  # 0: a chain point stacked with parallel ones
        drafting = jnp.where(par, dec.draft_passes * block, drafting)
        t_draft = jnp.where(par, block, t_draft)
    t_sd = drafting + verify.t_s + jnp.where(dec.k > 0, hw.step_overhead_s, 0.0)
    return tau, base, verify, t_draft, t_sd


def step(hw, deploy, target, draft, dec):
    """Evaluate speculative decoding at one operating point.

    Args:
      hw: `Hardware` (its static `roofline` picks the roofline mode). deploy: `Deployment`.
      target, draft: `Model` (draft = `Model.zeros()` for n-gram / ratio drafters). dec: `Decode`.

    Returns:
      `Result`. speedup = tau * T_target(B,1) / (k T_draft(B,1) + T_target(B,k+1)).

    Examples:
      >>> from specjax.inputs import hardware, models
      >>> hw = hardware.load("h200").resolve("bf16").replace(roofline="pass")
      >>> tgt = models.target(models.load_architecture("llama-3-70b"), kv_dtype="fp8")
      >>> dec = Decode(batch=1.0, k=2.0, alpha=0.814, context=2048.0, draft_cost_ratio=0.145)
      >>> r = step(hw, Deployment.single(), tgt, models.Model.zeros(), dec)
      >>> print(f"{float(r.speedup):.2f}")
      1.92
    """
    tau, base, verify, t_draft, t_sd = times(hw, deploy, target, draft, dec)
    speedup = tau * base.t_s / t_sd
    draft_layout = deploy.drafter()
    mb_base = max_batch(hw, deploy, (target,), dec.context + 1.0)
    kv_tokens = dec.context + dec.tree_tokens if dec.is_tree else dec.context + dec.k + 1.0
    mb_sd = max_batch(hw, deploy, (target, draft), (kv_tokens, dec.draft_context(kv_tokens)),
                      (deploy, draft_layout))
    # the model's invariants (every time > 0 and finite, 0 < S <= tau <= k+1): numbers that break them
    # (float overflow, absurd inputs that slipped past the edge) are never reported with status ok
    sane = (jnp.isfinite(speedup) & (base.t_s > 0) & (verify.t_s >= base.t_s * (1 - 1e-5)) & (t_sd > 0)
            & (t_draft >= 0) & (speedup > 0) & (speedup <= tau * (1 + 1e-5)) & (tau <= dec.k + 1.0 + 1e-5))
    if dec.is_tree:  # deeper than the estimate unrolls: no number
        sane = sane & (dec.tree_is_chain | (dec.k <= dec.tree_max_depth))
    status = jnp.where(sane, point_status(dec.batch, mb_base, mb_sd), code(Point.INVALID_INPUT))
    return Result(
        speedup=speedup, tokens_per_step=tau, alpha=jnp.asarray(dec.alpha, speedup.dtype), t_target_s=base.t_s,
        t_draft_s=t_draft, t_verify_s=verify.t_s, t_sd_step_s=t_sd,
        throughput_base_tok_s=dec.batch / base.t_s,
        throughput_sd_tok_s=dec.batch * tau / t_sd, max_batch_base=mb_base, max_batch_sd=mb_sd,
        feasible=(status == int(Point.OK)).astype(speedup.dtype), verify_compute_bound=verify.compute_bound,
        status=status)
