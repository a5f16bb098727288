"""Prefill as it runs (docs/model.md §3): c_p, the time of one prompt token.

A prompt of L_in tokens is prefilled in chunks of n_c = min(L_in, chunk_tokens) tokens. Each token's
FLOPs are 2 P_active plus attention over the prompt before it (causal: mean context L_in / 2), and run at
the achieved prefill FLOP/s eta_P F (`Hardware.prefill_efficiency`: prefill GEMMs are large and run
nearer peak than decode's). A chunk also reads bytes (the weights, the experts its n_c tokens touch, the
prompt's KV) at eta_W W; amortised over its tokens they bound c_p from below:

    c_p = max( F_tok / (eta_P F),  W_chunk / (n_c eta_W W) )  +  t_tok(1),

per GPU of the layout (the FLOPs and bytes of `roofline.operator_costs` for one sequence of n_c tokens),
where t_tok(1) is one token's activation traffic outside the GEMMs (`roofline.token_time`: a prompt token
pays its norms, rotary and expert dispatch as a decode token does; 0 in the pure roofline).
Communication and engine overheads are not counted here: a chunk shares its iteration, and so its pass,
with the decode tokens (docs/model.md §10). Pure functions of one point; 0 for a model with no weights.
"""

from typing import NamedTuple

import jax.numpy as jnp

from .roofline import operator_costs, token_time


class Prefill(NamedTuple):
    """One prompt token of a model, seconds per GPU of its layout."""

    c_p_s: float          # max(t_math_s, t_mem_s) + t_token_s
    t_math_s: float       # its FLOPs at eta_P F
    t_mem_s: float        # its chunk's bytes at eta_W W, over the chunk's tokens
    compute_bound: float  # 1.0 where the FLOPs decide
    t_token_s: float      # its activation traffic outside the GEMMs (`roofline.token_time` of one token)


def prefill(hw, deploy, model, load, expert_locality=0.0):
    """`Prefill` of one prompt token of `model` under `load` (its `input_len` and `chunk_tokens`).

    Args:
      hw: `Hardware` (flops_per_s, prefill_efficiency, hbm_bytes_per_s, hbm_efficiency).
      deploy: the model's `Deployment`. model: `Model`. load: `Load`.
      expert_locality: the workload's routing similarity (0: the chunk's tokens route independently).
    """
    n = load.input_len
    chunk = jnp.minimum(n, load.chunk_tokens)
    flops, nbytes = operator_costs(hw, deploy, model, jnp.ones_like(n), chunk, 0.5 * n, expert_locality)
    t_math = sum(flops) / chunk / (hw.flops_per_s * hw.prefill_efficiency)
    t_mem = sum(nbytes) / chunk / (hw.hbm_bytes_per_s * hw.hbm_efficiency)
    has = model.has_weights
    zero = jnp.zeros_like(t_math)
    t_tok = token_time(hw, deploy, model, jnp.ones_like(t_math))
    return Prefill(c_p_s=jnp.where(has, jnp.maximum(t_math, t_mem) + t_tok, zero),
                   t_math_s=jnp.where(has, t_math, zero), t_mem_s=jnp.where(has, t_mem, zero),
                   compute_bound=(t_math >= t_mem).astype(t_math.dtype), t_token_s=t_tok)


def prefill_per_token(hw, deploy, model, load, expert_locality=0.0):
    """c_p (seconds per prompt token): `prefill(...).c_p_s`."""
    return prefill(hw, deploy, model, load, expert_locality).c_p_s
