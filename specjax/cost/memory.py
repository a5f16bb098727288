"""Memory per replica (MODEL.md 2): weights plus the KV cache of every sequence must fit in
gpus x HBM x memory_fraction. Pure functions of one point."""

import jax.numpy as jnp

from .roofline import effective_context


def kv_bytes_per_seq(model, tokens):
    """KV-cache bytes one sequence of `tokens` tokens stores (windowed layers keep min(L, w))."""
    per_layer = model.kv_elems_per_tok * model.b_kv
    windowed = effective_context(tokens, model.window)
    return per_layer * (model.n_full_layers * tokens + model.n_window_layers * windowed)


def max_batch(hw, deploy, models, tokens):
    """Largest whole batch whose weights + KV fit in t*C*u; 0 if the weights alone do not fit."""
    budget = deploy.gpus * hw.hbm_bytes * deploy.memory_fraction
    weights = sum(m.weight_bytes for m in models)
    per_seq = sum(kv_bytes_per_seq(m, tokens) for m in models)
    free = budget - weights
    safe = jnp.where(per_seq > 0, per_seq, 1.0)
    return jnp.where(free > 0, jnp.where(per_seq > 0, jnp.floor(free / safe), jnp.inf), 0.0)
