"""Time of one forward pass of a model over n = B*q tokens, per GPU of a TP group (MODEL.md 1).

Operator classes: dense weights, LM head, routed experts, attention over full-context layers,
attention over sliding-window layers. Each has FLOPs and bytes; `mode="operator"` takes
max(t_math, t_mem) per operator and sums, `mode="pass"` takes one roofline for the whole
pass (the blog-post model); the mode is the static field `Hardware.roofline`. TP all-reduces and
the fixed per-pass overhead are added, never overlapped. Pure functions of one operating point
taking (hw, deploy, model, ...): vmap and jit them in callers.

At a knee (t_math == t_mem) `jnp.maximum` splits the gradient 0.5/0.5 and the derivative
jumps either side; sensitivities there are one-sided limits averaged.
"""

from typing import NamedTuple

import jax.numpy as jnp

from .trees import MODES

ACT_BYTES = 2.0  # bytes per activation element in all-reduces (bf16)
__all__ = ["MODES", "OPERATORS", "PassCost", "operator_times", "expected_experts", "effective_context",
           "operator_costs", "comm_time", "engine_overhead", "pass_cost"]


class PassCost(NamedTuple):
    """Cost of one forward pass on one GPU. Times in seconds, FLOPs and bytes per GPU."""

    t_s: float          # total: roofline + communication + fixed overhead
    t_math_s: float     # sum of FLOPs / achieved FLOP/s
    t_mem_s: float      # sum of bytes / achieved bytes/s
    t_comm_s: float
    flops: float
    bytes: float
    compute_bound: float  # 1.0 where the roofline part is limited by FLOP/s


def expected_experts(n_tokens, n_experts, top_k):
    """Expected distinct experts touched by n tokens under uniform routing: E*(1-(1-r/E)^n).

    MoESD (arXiv 2505.19645). Zero when there are no experts; `top_k == n_experts` gives E.
    """
    safe_e = jnp.where(n_experts > 0, n_experts, 1.0)
    miss = jnp.clip(1.0 - top_k / safe_e, 0.0, 1.0)
    # (1-p)^n with p == 1 must be 0 with finite gradient: use where on a safe base.
    pos = miss > 0
    touched = safe_e * (1.0 - jnp.where(pos, jnp.exp(n_tokens * jnp.log(jnp.where(pos, miss, 1.0))), 0.0))
    return jnp.where(n_experts > 0, touched, 0.0)


def effective_context(context, window):
    """Tokens of KV a sliding-window layer reads or stores: min(L, window) (full layers: L)."""
    return jnp.minimum(context, window)


def operator_costs(hw, deploy, model, batch, q, context, expert_locality=0.0):
    """FLOPs and bytes per GPU of each operator class, as two tuples of 5 scalars.

    Order: dense weights, LM head, routed experts, full attention, windowed attention.
    Tuples, not stacked arrays, so that a vmapped grid fuses into one elementwise loop.
    """
    n = batch * q
    kv_tok = model.kv_elems_per_tok * model.b_kv
    l_full = context
    l_win = effective_context(context, model.window)
    shards = deploy.operator_shards()
    flops = tuple(f / t for t, f in zip(shards, (
        2.0 * n * model.p_dense,
        2.0 * n * model.p_head,
        2.0 * n * model.n_moe_layers * model.top_k * model.p_expert,
        model.n_full_layers * model.attn_flops_per_ctx * n * l_full,
        model.n_window_layers * model.attn_flops_per_ctx * n * l_win,
    )))
    n_route = q * (1.0 + (1.0 - expert_locality) * (batch - 1.0))  # = n for independent routing
    touched = expected_experts(n_route, model.n_experts, model.top_k)
    kv_shards = (model.kv_split(shards[3]), model.kv_split(shards[4]))  # KV splits only as far as its heads
    nbytes = tuple(w / t for t, w in zip(shards[:3] + kv_shards, (
        model.p_dense * model.b_dense,
        model.p_head * model.b_head,
        model.n_moe_layers * touched * model.p_expert * model.b_expert,
        model.n_full_layers * (batch * kv_tok * l_full + n * kv_tok),
        model.n_window_layers * (batch * kv_tok * l_win + n * kv_tok),
    )))
    return flops, nbytes


def comm_time(hw, deploy, model, batch, q):
    """Two ring all-reduces per layer of n*d*2 bytes: 2(t-1)/t * bytes / link_bw + latency each."""
    n, tp = batch * q, deploy.tp
    payload = n * model.d_model * ACT_BYTES
    one = 2.0 * (tp - 1.0) / tp * payload / hw.link_bytes_per_s + hw.link_latency_s
    return jnp.where(tp > 1.0, 2.0 * model.n_layers * one, 0.0)


OPERATORS = ("dense weights", "LM head", "routed experts", "attention (full)", "attention (window)")


def operator_times(hw, deploy, model, batch, q, context, expert_locality=0.0):
    """Per operator class (`OPERATORS` order): (flops, bytes, t_math, t_mem, t) with
    t = max(t_math, t_mem) + sigma min(t_math, t_mem), the operator-mode roofline time of each."""
    flops, nbytes = operator_costs(hw, deploy, model, batch, q, context, expert_locality)
    f_rate = hw.flops_per_s * hw.flops_efficiency
    w_rate = hw.hbm_bytes_per_s * hw.hbm_efficiency
    t_math = tuple(f / f_rate for f in flops)
    t_mem = tuple(w / w_rate for w in nbytes)
    t = tuple(jnp.maximum(a, b) + hw.non_overlap * jnp.minimum(a, b) for a, b in zip(t_math, t_mem))
    return flops, nbytes, t_math, t_mem, t


def engine_overhead(hw, model):
    """T_over = T_pass_fixed + n_layers t_layer (MODEL.md 1.2): what an engine adds to every pass of a
    model, whatever its size; 0 for a model with no weights and in the pure roofline."""
    return jnp.where(model.has_weights, hw.fixed_overhead_s + model.n_layers * hw.layer_overhead_s, 0.0)


def pass_cost(hw, deploy, model, batch, q, context, expert_locality=0.0):
    """Roofline time of one forward pass of `model` over `batch` sequences x `q` tokens.

    T_pass = sum_op max(F_op/(eta_F F), W_op/(eta_W W)) + T_comm + T_over  (mode="operator"),
    (plus sigma * min(...) per operator when the hardware's `non_overlap` sigma > 0; 0 by default),
    or max(sum F/(eta_F F), sum W/(eta_W W)) + T_comm + T_over             (mode="pass"),
    with T_over = T_pass_fixed + n_layers t_layer (`engine_overhead`).

    Args:
      hw: `Hardware` (its static `roofline` picks the mode). deploy: `Deployment`. model: `Model`.
      batch: sequences (B). q: tokens per sequence in this pass (1 decode, k+1 verify).
      context: tokens already in the KV cache per sequence (L).
      expert_locality: the workload's routing similarity lambda (`Decode.expert_locality`).

    Returns:
      `PassCost`. A model with no weights (`Model.zeros()`) costs exactly 0.
    """
    flops, nbytes, t_math, t_mem, t_op = operator_times(hw, deploy, model, batch, q, context, expert_locality)
    t_math_sum, t_mem_sum = sum(t_math), sum(t_mem)
    if hw.roofline == "operator":
        roof = sum(t_op)
        compute_share = sum(jnp.where(a > b, a, 0.0) for a, b in zip(t_math, t_mem))
        compute_bound = (compute_share > 0.5 * roof).astype(roof.dtype)
    else:
        roof = jnp.maximum(t_math_sum, t_mem_sum) + hw.non_overlap * jnp.minimum(t_math_sum, t_mem_sum)
        compute_bound = (t_math_sum > t_mem_sum).astype(roof.dtype)
    t_comm = jnp.where(model.has_weights, comm_time(hw, deploy, model, batch, q), 0.0)
    fixed = engine_overhead(hw, model)
    return PassCost(t_s=roof + t_comm + fixed, t_math_s=t_math_sum, t_mem_s=t_mem_sum,
                    t_comm_s=t_comm, flops=sum(flops), bytes=sum(nbytes), compute_bound=compute_bound)
