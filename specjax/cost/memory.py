"""Memory per replica (docs/model.md §6): on its busiest GPU, a replica's weights plus the KV cache of
its sequences must fit in HBM x memory_fraction.

Per GPU of a layout of G = tp x dp_attention GPUs: the replica's weights over G, plus the attention
projections that every attention-DP rank holds whole; the KV of batch / dp_attention sequences split
over min(tp, kv_heads) GPUs (MLA: every GPU of an attention rank holds the whole latent). A drafter at
its own `draft_tp` lives on draft_tp of the GPUs, which are then the busiest. The functions below
express each model's per-GPU need in replica units (x G), so that pure tensor parallelism reads as
weights + B x KV <= tp x HBM x u. Pure functions of one point.
"""

import jax.numpy as jnp

from .roofline import effective_context


def kv_bytes_per_seq(model, tokens):
    """KV-cache bytes one sequence of `tokens` tokens stores (windowed layers keep min(L, w))."""
    per_layer = model.kv_elems_per_tok * model.b_kv
    windowed = effective_context(tokens, model.window)
    return per_layer * (model.n_full_layers * tokens + model.n_window_layers * windowed)


def replica_weight_bytes(deploy, model, layout):
    """G x the weight bytes one GPU of `layout` holds for `model` (G = the replica's GPUs): the
    weights plus a copy of the attention projections per extra attention-DP rank, over layout's GPUs."""
    extra = (layout.dp_attention - 1.0) * model.p_attn * model.b_dense * model.weights_resident
    return (model.weight_bytes + extra) * (deploy.gpus / layout.gpus)


def replica_kv_bytes_per_seq(deploy, model, layout, tokens):
    """G x the KV bytes one GPU of `layout` holds per sequence of the replica: 1 / d_a of the sequences,
    split over min(tp, kv_heads) GPUs."""
    return kv_bytes_per_seq(model, tokens) * (deploy.gpus / layout.dp_attention) / model.kv_split(layout.tp)


def max_batch(hw, deploy, models, tokens, layouts=None):
    """Largest whole batch whose weights + KV fit on the busiest GPU (HBM x u); 0 if the weights alone
    do not fit. `tokens`: KV tokens per sequence, one for all models or a tuple (a drafter with a bounded
    KV cache keeps fewer). `layouts`: each model's `Deployment` (default: `deploy` for all)."""
    layouts = layouts or (deploy,) * len(models)
    tokens = tokens if isinstance(tokens, tuple) else (tokens,) * len(models)
    budget = deploy.gpus * hw.hbm_bytes * deploy.memory_fraction
    weights = _replica_weights(deploy, models, layouts)
    per_seq = sum(replica_kv_bytes_per_seq(deploy, m, lay, t) for m, lay, t in zip(models, layouts, tokens))
    free = budget - weights
    safe = jnp.where(per_seq > 0, per_seq, 1.0)
    return jnp.where(free > 0, jnp.where(per_seq > 0, jnp.floor(free / safe), jnp.inf), 0.0)


def _replica_weights(deploy, models, layouts):
    return sum(replica_weight_bytes(deploy, m, lay) for m, lay in zip(models, layouts))


def weights_per_gpu(deploy, models, layouts=None):
    """Weight bytes on the busiest GPU (for messages: does the model fit at all)."""
    return _replica_weights(deploy, models, layouts or (deploy,) * len(models)) / deploy.gpus
