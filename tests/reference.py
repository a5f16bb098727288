"""Plain-Python floats implementation of MODEL.md, written independently of the JAX kernels.

Models and hardware are dicts of floats (from the pytrees via `as_floats`). Used by tests
to compare the kernels on many points, and by bench/ as the scalar-loop baseline.
"""

import math


def as_floats(tree):
    return {k: float(getattr(tree, k)) for k in tree.field_names}


def tau(alpha, k):
    if alpha == 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def distinct_experts(n, e, r):
    if e == 0:
        return 0.0
    return e * (1.0 - (1.0 - r / e) ** n)


def kv_ways(m, tp):
    """GPUs the KV cache is split over: min(tp, KV heads), at least 1 (`kv_heads` is 1 for MLA)."""
    return max(min(tp, m.get("kv_heads", 1.0)), 1.0)


def t_pass(m, hw, batch, q, ctx, tp=1.0, mode="operator", locality=0.0):
    n = batch * q
    kv = m["kv_elems_per_tok"] * m["b_kv"]
    l_win = min(ctx, m["window"])
    n_route = q * (1.0 + (1.0 - locality) * (batch - 1.0))
    ops = [  # (flops, bytes)
        (2 * n * m["p_dense"], m["p_dense"] * m["b_dense"]),
        (2 * n * m["p_head"], m["p_head"] * m["b_head"]),
        (2 * n * m["n_moe_layers"] * m["top_k"] * m["p_expert"],
         m["n_moe_layers"] * distinct_experts(n_route, m["n_experts"], m["top_k"]) * m["p_expert"] * m["b_expert"]),
    ]
    kv_split = kv_ways(m, tp)  # MODEL.md 1.1: KV splits over min(tp, KV heads); MLA not at all
    ops = [(f / tp, w / tp) for f, w in ops]
    for layers, l_eff in ((m["n_full_layers"], ctx), (m["n_window_layers"], l_win)):
        ops.append((layers * m["attn_flops_per_ctx"] * n * l_eff / tp,
                    layers * (batch * kv * l_eff + n * kv) / kv_split))
    f_rate = hw["flops_per_s"] * hw["flops_efficiency"]
    w_rate = hw["hbm_bytes_per_s"] * hw["hbm_efficiency"]
    sigma = hw.get("non_overlap", 0.0)
    if mode == "operator":
        roof = sum(max(f / f_rate, w / w_rate) + sigma * min(f / f_rate, w / w_rate) for f, w in ops)
    else:
        tm, tw = sum(f for f, _ in ops) / f_rate, sum(w for _, w in ops) / w_rate
        roof = max(tm, tw) + sigma * min(tm, tw)
    if m["p_dense"] + m["p_head"] + m["p_expert"] == 0:
        return 0.0
    comm = 0.0
    if tp > 1:
        payload = n * m["d_model"] * 2.0
        comm = 2 * m["n_layers"] * (2 * (tp - 1) / tp * payload / hw["link_bytes_per_s"] + hw["link_latency_s"])
    overhead = hw["fixed_overhead_s"] + m["n_layers"] * hw.get("layer_overhead_s", 0.0)  # MODEL.md 1.2
    return roof + comm + overhead


def speedup(hw, tgt, draft, batch, k, alpha, ctx, tp=1.0, c=0.0, mode="operator", locality=0.0):
    base = t_pass(tgt, hw, batch, 1, ctx, tp, mode, locality)
    has_draft = draft["p_dense"] + draft["p_head"] + draft["p_expert"] > 0
    t_draft = t_pass(draft, hw, batch, 1, ctx, tp, mode, locality) + c * base \
        + (hw.get("draft_overhead_s", 0.0) if has_draft else 0.0)
    t_sd = k * t_draft + t_pass(tgt, hw, batch, k + 1, ctx, tp, mode, locality) \
        + (hw.get("step_overhead_s", 0.0) if k > 0 else 0.0)
    return tau(alpha, k) * base / t_sd


def weight_bytes(m):
    return (m["p_dense"] * m["b_dense"] + (m["p_head"] * m["head_resident"] + m["p_stored"]) * m["b_head"]
            + m["n_moe_layers"] * m["n_experts"] * m["p_expert"] * m["b_expert"])


def kv_per_seq(m, tokens):
    return m["kv_elems_per_tok"] * m["b_kv"] * (m["n_full_layers"] * tokens
                                                 + m["n_window_layers"] * min(tokens, m["window"]))


def max_batch(hw, models, tokens, tp=1.0, u=0.9):
    free = tp * hw["hbm_bytes"] * u - sum(weight_bytes(m) for m in models)
    per = sum(kv_per_seq(m, tokens) * tp / kv_ways(m, tp) for m in models)  # KV replicated past its heads
    return 0.0 if free <= 0 else math.floor(free / per)
