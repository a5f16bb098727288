"""Memory per replica (MODEL.md 2): weights plus the KV cache of every sequence must fit in
gpus x HBM x memory_fraction. Under tensor parallelism the KV cache is split only as far as its heads
go (MODEL.md 1.1): each GPU holds 1/min(tp, kv_heads) of it, so the replica stores tp/min(tp, kv_heads)
copies' worth (MLA: every GPU holds the whole latent). Pure functions of one point."""

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
    # KV split over min(tp, kv_heads) GPUs is stored tp / min(tp, kv_heads) times in the replica
    per_seq = sum(kv_bytes_per_seq(m, tokens) * deploy.tp / m.kv_split(deploy.tp) for m in models)
    free = budget - weights
    safe = jnp.where(per_seq > 0, per_seq, 1.0)
    return jnp.where(free > 0, jnp.where(per_seq > 0, jnp.floor(free / safe), jnp.inf), 0.0)
