"""Parameter counts of a `Model` (docs/model.md §2.1), as functions of anything with its fields: the pytree's
properties (`Model.total_params`, `Model.active_params`) and `specjax presets` (on host floats, without
importing JAX) compute them here, once."""


def total_params(m):
    """All stored weight params (experts, embedding and a resident head included)."""
    return m.p_dense + m.p_head * m.head_resident + m.p_stored + m.n_moe_layers * m.n_experts * m.p_expert


def active_params(m):
    """Params read for one token: dense + head + top-r experts per MoE layer (no embedding)."""
    return m.p_dense + m.p_head + m.n_moe_layers * m.top_k * m.p_expert
