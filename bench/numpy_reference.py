"""NumPy-vectorised reference of the specjax cost model (same formulas, written for arrays).

Used by bench/throughput.py and bench/kernels.py as the baseline the JAX kernel must beat, and checked
against it there. Models and hardware are dicts of floats (tests/reference.py `as_floats`); the
operating point is arrays (batch, k, alpha, context) of one shape; a layout (tp, ep, dp_attention,
imbalance), an acceptance vector and a draft-tree shape are scalars of the whole grid. Covers docs/model.md §2.3
(per-operator roofline), §2.4, §2.5 (per-GPU costs and collectives), §2.6 (engine overheads), §4.3
(per-position acceptance) and §4.4 (the tree estimate).
"""

import math

import numpy as np


def tau(alpha, k):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return np.where(alpha == 1.0, k + 1.0, out)


def tau_from_rates(rates, k):
    """1 + sum_i prod_{j<=i} a_j for integer k (array), the last rate repeating beyond the vector."""
    out, reach = np.ones_like(k, dtype=float), np.ones_like(k, dtype=float)
    for i in range(1, int(np.max(k)) + 1):
        reach = reach * rates[min(i, len(rates)) - 1]
        out = out + np.where(i <= k, reach, 0.0)
    return out


def tree_tau(alpha, topk, tokens, depth):
    """The tree estimate of docs/model.md §4.4 at i.i.d. alpha (array), for one shape (scalars)."""
    remaining, above, out, reach = tokens - 1, 1, np.ones_like(alpha), np.ones_like(alpha)
    for d in range(1, depth + 1):
        w = min(topk ** d, math.ceil(remaining / (depth - d + 1)))
        remaining -= w
        m = w / above
        p = (1 - (1 - alpha) ** m) if m >= 1 else m * alpha
        reach = reach * p
        out = out + reach
        above = w
    return out


def _link(hw, group):
    if group > hw.get("gpus_per_node", 8.0):
        return hw.get("internode_bytes_per_s", 5e10), hw.get("internode_latency_s", 1e-5)
    return hw["link_bytes_per_s"], hw["link_latency_s"]


def all_reduce(hw, nbytes, group):
    if group <= 1:
        return 0.0 * nbytes
    bw, lat = _link(hw, group)
    return 2 * (group - 1) / group * nbytes / bw + lat


def all_to_all(hw, m, n, tp, ep, dp):
    g = tp * dp
    if ep <= 1:
        return 0.0 * n
    sent = n / g * m["top_k"] * m["d_model"] * 2.0
    off_rank = (ep - 1) / ep
    off_node = min(max(0.0, 1 - hw.get("gpus_per_node", 8.0) / g), off_rank)
    t = np.maximum((off_rank - off_node) * sent / hw["link_bytes_per_s"],
                   off_node * sent / hw.get("internode_bytes_per_s", 5e10))
    return t + (hw.get("internode_latency_s", 1e-5) if off_node > 0 else hw["link_latency_s"])


def communication(hw, m, n, tp=1.0, ep=1.0, dp=1.0):
    act = m["d_model"] * 2.0
    g = tp * dp
    n_moe = m["n_moe_layers"] if ep > 1 and dp > 1 else 0.0
    attention = all_reduce(hw, n / dp * act, tp)
    dense = all_reduce(hw, n * act, g)
    moe = 2 * all_to_all(hw, m, n, tp, ep, dp) + (all_reduce(hw, n * m["top_k"] / ep * act, g / ep) if n_moe
                                                  else 0.0)
    return m["n_layers"] * attention + (m["n_layers"] - n_moe) * dense + n_moe * moe


def t_pass(m, hw, batch, q, ctx, tp=1.0, ep=1.0, dp=1.0, imbalance=1.0):
    """Operator-mode roofline time of one pass per GPU (arrays in, array out), with its collectives and
    the engine's per-pass, per-layer and per-kernel overheads and its per-token traffic."""
    if m["p_dense"] + m["p_head"] + m["p_expert"] == 0:
        return 0.0 * batch
    g = tp * dp
    n = batch * q
    kv = m["kv_elems_per_tok"] * m["b_kv"]
    f_rate = hw["flops_per_s"] * hw["flops_efficiency"]
    w_rate = hw["hbm_bytes_per_s"] * hw["hbm_efficiency"]
    e = m["n_experts"]
    n_route = q * (1.0 + (1.0 - hw.get("expert_locality", 0.0)) * (batch - 1.0))
    touched = e * (1.0 - (1.0 - m["top_k"] / e) ** n_route) if e > 0 else 0.0 * n
    l_win = np.minimum(ctx, m["window"])
    p_attn = m.get("p_attn", 0.0)
    kv_ways = dp * max(min(tp, m.get("kv_heads", 1.0)), 1.0)
    ops = [
        (2 * n * m["p_dense"] / g, (m["p_dense"] + (dp - 1) * p_attn) * m["b_dense"] / g),
        (2 * n * m["p_head"] / g, m["p_head"] * m["b_head"] / g),
        (2 * n * m["n_moe_layers"] * m["top_k"] * m["p_expert"] * imbalance / g,
         m["n_moe_layers"] * touched * m["p_expert"] * m["b_expert"] * imbalance / g),
        (m["n_full_layers"] * m["attn_flops_per_ctx"] * n * ctx / g,
         m["n_full_layers"] * (batch * kv * ctx + n * kv) / kv_ways),
        (m["n_window_layers"] * m["attn_flops_per_ctx"] * n * l_win / g,
         m["n_window_layers"] * (batch * kv * l_win + n * kv) / kv_ways),
    ]
    t = sum(np.maximum(f / f_rate, w / w_rate) for f, w in ops)
    overhead = (hw["fixed_overhead_s"] + m["n_layers"] * hw.get("layer_overhead_s", 0.0)
                + m.get("n_kernels", 0.0) * hw.get("kernel_overhead_s", 0.0))
    vectors = (n / dp * m["n_layers"] * hw.get("activation_traffic", 0.0)  # docs/model.md §2.7's per-token terms
               + n * m["top_k"] / ep * m["n_moe_layers"] * hw.get("expert_traffic", 0.0))
    tokens = vectors * m["d_model"] * 2.0 / w_rate * (m["n_layers"] > 0)
    return t + communication(hw, m, n, tp, ep, dp) + overhead + tokens


def speedup(hw, tgt, draft, batch, k, alpha, ctx, lay=None, rates=None, tree=None):
    """S (docs/model.md §5.3). `lay`: dict tp, ep, dp, imbalance (the drafter in the target's layout);
    `rates`: an acceptance vector (integer k); `tree`: (topk, tokens) of a tree of depth k (one shape)."""
    lay = lay or {}
    base = t_pass(tgt, hw, batch, 1.0, ctx, **lay)
    has_draft = draft["p_dense"] + draft["p_head"] + draft["p_expert"] > 0
    extra = hw.get("draft_overhead_s", 0.0) if has_draft else 0.0
    first = t_pass(draft, hw, batch, 1.0, ctx, **lay) + extra
    topk, tokens = tree or (1.0, None)
    rest = t_pass(draft, hw, batch, float(topk), ctx, **lay) + extra if tree else first
    verify = t_pass(tgt, hw, batch, float(tokens) if tree else k + 1.0, ctx, **lay)
    t_sd = first + (k - 1) * rest + verify + np.where(k > 0, hw.get("step_overhead_s", 0.0), 0.0)
    if tree:
        t = tree_tau(alpha, topk, tokens, int(np.max(k)))
    else:
        t = tau_from_rates(rates, k) if rates is not None else tau(alpha, k)
    return t * base / t_sd
