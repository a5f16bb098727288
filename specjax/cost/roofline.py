"""Time of one forward pass of a model over n = B*q tokens, per GPU of a TP group (docs/model.md §2).

Operator classes: dense weights, LM head, routed experts, attention over full-context layers,
attention over sliding-window layers, per GPU of a replica laid out by `Deployment` (tensor, expert and
attention-data parallelism, docs/model.md §2.4). Each has FLOPs and bytes; `mode="operator"` takes
max(t_math, t_mem) per operator and sums, `mode="pass"` takes one roofline for the whole
pass (the blog-post model); the mode is the static field `Hardware.roofline`. All-reduces, all-to-alls and
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
           "operator_costs", "all_reduce_time", "all_to_all_time", "comm_time", "engine_overhead", "token_time",
           "pass_cost"]


class PassCost(NamedTuple):
    """Cost of one forward pass on one GPU. Times in seconds, FLOPs and bytes per GPU."""

    t_s: float          # total: roofline + communication + fixed overhead
    t_math_s: float     # sum of FLOPs / achieved FLOP/s
    t_mem_s: float      # sum of bytes / achieved bytes/s
    t_comm_s: float
    t_token_s: float    # per-token activation traffic outside the GEMMs (`token_time`; 0 in the pure roofline)
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
    """FLOPs and bytes per GPU of each operator class, as two tuples of 5 scalars (docs/model.md §2.1, §2.4).

    Order: dense weights, LM head, routed experts, full attention, windowed attention.
    Tuples, not stacked arrays, so that a vmapped grid fuses into one elementwise loop.

    Per GPU of a replica of G = tp x dp_attention GPUs: every operator's FLOPs are the replica's over
    G (attention-DP ranks each take batch / dp_attention sequences, split tp ways: n / G tokens).
    Bytes: dense weights over G plus the attention projections, which each DP rank holds whole
    (p_attn (d_a - 1) extra); routed experts U(n) P_e b_e / G (E / ep experts per rank, each split
    G / ep ways: U(n) / ep distinct per rank); the KV of batch / d_a sequences over min(tp, KV heads).
    The busiest rank's expert work is `expert_imbalance` times the mean under expert parallelism (ep > 1);
    without it every GPU holds a 1/G slice of every expert, so routing skew cannot load one GPU more than
    another and the factor is inert (`Scenario.check` refuses it at ep = 1; a sweep grid gets it inert).
    """
    n = batch * q
    kv_tok = model.kv_elems_per_tok * model.b_kv
    l_full = context
    l_win = effective_context(context, model.window)
    g = deploy.gpus
    imb = jnp.where(deploy.ep > 1.0, deploy.expert_imbalance, 1.0)  # only EP ranks hold different experts
    flops = (
        2.0 * n * model.p_dense / g,
        2.0 * n * model.p_head / g,
        2.0 * n * model.n_moe_layers * model.top_k * model.p_expert * imb / g,
        model.n_full_layers * model.attn_flops_per_ctx * n * l_full / g,
        model.n_window_layers * model.attn_flops_per_ctx * n * l_win / g,
    )
    n_route = q * (1.0 + (1.0 - expert_locality) * (batch - 1.0))  # = n for independent routing
    touched = expected_experts(n_route, model.n_experts, model.top_k)
    kv_ways = deploy.dp_attention * model.kv_split(deploy.tp)  # KV splits only as far as its heads go
    nbytes = (
        (model.p_dense + (deploy.dp_attention - 1.0) * model.p_attn) * model.b_dense / g,
        model.p_head * model.b_head / g,
        model.n_moe_layers * touched * model.p_expert * model.b_expert * imb / g,
        model.n_full_layers * (batch * kv_tok * l_full + n * kv_tok) / kv_ways,
        model.n_window_layers * (batch * kv_tok * l_win + n * kv_tok) / kv_ways,
    )
    return flops, nbytes


def _link(hw, group):
    """(bytes/s, latency) of a collective over `group` GPUs: the NVLink-class link within a node of
    `gpus_per_node`, the inter-node network once the group spans nodes."""
    across = group > hw.gpus_per_node
    return (jnp.where(across, hw.internode_bytes_per_s, hw.link_bytes_per_s),
            jnp.where(across, hw.internode_latency_s, hw.link_latency_s))


def all_reduce_time(hw, payload, group):
    """Ring all-reduce of `payload` bytes over `group` GPUs: 2(g-1)/g payload / link_bw + latency; 0 for g = 1."""
    bw, lat = _link(hw, group)
    return jnp.where(group > 1.0, 2.0 * (group - 1.0) / group * payload / bw + lat, 0.0)


def all_to_all_time(hw, deploy, model, n):
    """One dispatch (or combine) all-to-all of an MoE layer under expert parallelism (docs/model.md §2.5).

    Each GPU owns n / G of the tokens and sends each token's activation (d_model x 2 bytes) to its r
    experts, a fraction (ep - 1) / ep of them on another EP rank; of those, a fraction
    max(0, 1 - gpus_per_node / G) is on another node (inter-node bytes over the network, concurrent
    with the intra-node ones over the link). 0 for ep = 1."""
    g, ep = deploy.gpus, deploy.ep
    sent = n / g * model.top_k * model.d_model * ACT_BYTES
    off_rank = (ep - 1.0) / ep
    off_node = jnp.clip(1.0 - hw.gpus_per_node / g, 0.0, off_rank)
    lat = jnp.where(off_node > 0, hw.internode_latency_s, hw.link_latency_s)
    t = jnp.maximum((off_rank - off_node) * sent / hw.link_bytes_per_s, off_node * sent / hw.internode_bytes_per_s)
    return jnp.where(ep > 1.0, t + lat, 0.0)


def comm_time(hw, deploy, model, batch, q):
    """Communication of one pass, per GPU (docs/model.md §2.5: added, never overlapped).

    Every layer: an all-reduce after attention over the tp GPUs of an attention-DP rank (its n / d_a
    tokens) and one after the FFN over all G GPUs (the gathered n tokens: with DP attention this is
    the all-gather before and the reduce-scatter after the FFN). Where tokens are partitioned over
    attention-DP ranks (d_a > 1) and experts over EP ranks (ep > 1), an MoE layer's FFN all-reduce is
    replaced by a dispatch and a combine all-to-all, plus, where each expert is split over G / ep > 1
    GPUs, an all-reduce of its n r / ep token outputs inside its group. With d_a = 1 every GPU already
    holds every token after attention, and an EP MoE layer combines its experts' outputs with the same
    all-reduce as tensor parallelism (TensorRT-LLM's attention TP + MoE EP, vLLM's EP without DP).
    ep = d_a = 1 and tp <= gpus_per_node: 2 ring all-reduces of n d 2 bytes per layer.
    """
    if not deploy.parallel:  # pure TP: the two all-reduces of every layer, nothing else to compute
        return 2.0 * model.n_layers * all_reduce_time(hw, batch * q * model.d_model * ACT_BYTES, deploy.tp)
    n, g, ep = batch * q, deploy.gpus, deploy.ep
    act = model.d_model * ACT_BYTES
    attention = model.n_layers * all_reduce_time(hw, (n / deploy.dp_attention) * act, deploy.tp)
    ffn_all_reduce = all_reduce_time(hw, n * act, g)
    expert_parallel = (2.0 * all_to_all_time(hw, deploy, model, n)
                       + all_reduce_time(hw, n * model.top_k / ep * act, deploy.expert_tp))
    dispatched = (ep > 1.0) & (deploy.dp_attention > 1.0)
    moe = model.n_moe_layers * jnp.where(dispatched, expert_parallel - ffn_all_reduce, 0.0)
    return attention + model.n_layers * ffn_all_reduce + moe


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
    """T_over = T_pass_fixed + n_layers t_layer + n_kernels t_kernel (docs/model.md §2.6, with the launch
    cost of each kernel: `Model.n_kernels`): what an engine adds to every pass of a model, whatever its
    size; 0 for a model with no weights and in the pure roofline."""
    per_pass = hw.fixed_overhead_s + model.n_layers * hw.layer_overhead_s + model.n_kernels * hw.kernel_overhead_s
    return jnp.where(model.has_weights, per_pass, 0.0)


def token_time(hw, deploy, model, n):
    """Per-token cost the roofline's operators miss (docs/model.md §2.7), per GPU, for a pass over `n` tokens:

        t_tok = (n / d_a  n_layers v_act  +  n r / ep  n_moe v_exp) d_model 2 bytes / (eta_W W),

    v_act = `Hardware.activation_traffic` (16-bit d_model-wide vectors a token reads or writes per layer
    outside the weight GEMMs: norms, residual adds, rotary, quantisation), v_exp = `expert_traffic` (the
    same per token per routed expert in an MoE layer: the dispatch copy, the expert intermediate, the
    combine). A token's activations live on every GPU of its tensor-parallel group (not split by tp);
    attention-DP ranks each hold n / d_a tokens, and each EP rank runs n r / ep of the token-expert pairs.
    0 in the pure roofline (both terms 0) and for a model with no weights."""
    vectors = (n / deploy.dp_attention * model.n_layers * hw.activation_traffic
               + n * model.top_k / deploy.ep * model.n_moe_layers * hw.expert_traffic)
    t = vectors * model.d_model * ACT_BYTES / (hw.hbm_bytes_per_s * hw.hbm_efficiency)
    return jnp.where(model.has_weights, t, 0.0)


def pass_cost(hw, deploy, model, batch, q, context, expert_locality=0.0):
    """Roofline time of one forward pass of `model` over `batch` sequences x `q` tokens.

    T_pass = sum_op max(F_op/(eta_F F), W_op/(eta_W W)) + T_comm + T_over  (mode="operator"),
    (plus sigma * min(...) per operator when the hardware's `non_overlap` sigma > 0; 0 by default),
    or max(sum F/(eta_F F), sum W/(eta_W W)) + T_comm + T_over             (mode="pass"),
    with T_over = T_pass_fixed + n_layers t_layer + n_kernels t_kernel (`engine_overhead`), plus the
    per-token activation traffic t_tok of `token_time` (added, never overlapped).

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
    t_tok = token_time(hw, deploy, model, batch * q)
    return PassCost(t_s=roof + t_comm + fixed + t_tok, t_math_s=t_math_sum, t_mem_s=t_mem_sum, t_comm_s=t_comm,
                    t_token_s=t_tok, flops=sum(flops), bytes=sum(nbytes), compute_bound=compute_bound)
