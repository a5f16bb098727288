"""NumPy-vectorised reference of the specjax cost model (same formulas, written for arrays).

Used by bench/throughput.py as the baseline the JAX kernel must beat, and checked against it
there. Models and hardware are dicts of floats (tests/reference.py `as_floats`); the operating
point is arrays (batch, k, alpha, context) of one shape.
"""

import numpy as np


def tau(alpha, k):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return np.where(alpha == 1.0, k + 1.0, out)


def t_pass(m, hw, batch, q, ctx, tp=1.0):
    """Operator-mode roofline time of one pass (arrays in, array out)."""
    n = batch * q
    kv = m["kv_elems_per_tok"] * m["b_kv"]
    f_rate = hw["flops_per_s"] * hw["flops_efficiency"]
    w_rate = hw["hbm_bytes_per_s"] * hw["hbm_efficiency"]
    e = m["n_experts"]
    n_route = q * (1.0 + (1.0 - hw.get("expert_locality", 0.0)) * (batch - 1.0))
    touched = e * (1.0 - (1.0 - m["top_k"] / e) ** n_route) if e > 0 else 0.0 * n
    l_win = np.minimum(ctx, m["window"])
    ops = [
        (2 * n * m["p_dense"], m["p_dense"] * m["b_dense"]),
        (2 * n * m["p_head"], m["p_head"] * m["b_head"]),
        (2 * n * m["n_moe_layers"] * m["top_k"] * m["p_expert"],
         m["n_moe_layers"] * touched * m["p_expert"] * m["b_expert"]),
        (m["n_full_layers"] * m["attn_flops_per_ctx"] * n * ctx, m["n_full_layers"] * (batch * kv * ctx + n * kv)),
        (m["n_window_layers"] * m["attn_flops_per_ctx"] * n * l_win,
         m["n_window_layers"] * (batch * kv * l_win + n * kv)),
    ]
    t = sum(np.maximum(f / tp / f_rate, w / tp / w_rate) for f, w in ops)
    return t + hw["fixed_overhead_s"]


def speedup(hw, tgt, draft, batch, k, alpha, ctx):
    base = t_pass(tgt, hw, batch, 1.0, ctx)
    t_sd = k * t_pass(draft, hw, batch, 1.0, ctx) + t_pass(tgt, hw, batch, k + 1.0, ctx)
    return tau(alpha, k) * base / t_sd
