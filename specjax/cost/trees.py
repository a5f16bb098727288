"""The kernels' inputs as pytrees, in the order every kernel takes them (MODEL.md notation):

  (Hardware, Deployment, target Model, draft Model, Decode)

`Hardware` is the accelerator as an engine drives it (silicon rates, achieved fractions, overheads,
and the roofline mode as a static field); `Deployment` is how a replica is laid out on GPUs;
`Model` the cost-relevant shape of one model replica; `Decode` the operating point. Every numeric
field is a leaf (vmap, grad); builders live in `hardware`, `models` and `scenario`.
"""

import jax.numpy as jnp

from ._pytree import pytree_dataclass, static

MODES = ("operator", "pass")


@pytree_dataclass
class Hardware:
    """One accelerator as seen by the kernels (SI units in the names).

    Attributes:
      flops_per_s: peak dense FLOP/s for the compute dtype, one GPU.
      hbm_bytes_per_s: HBM bandwidth, bytes/s, one GPU.
      hbm_bytes: HBM capacity, bytes, one GPU.
      link_bytes_per_s: interconnect bandwidth, one direction, bytes/s, one GPU.
      link_latency_s: latency added to each all-reduce, seconds.
      flops_efficiency: achieved fraction of `flops_per_s` (eta_F).
      hbm_efficiency: achieved fraction of `hbm_bytes_per_s` (eta_W).
      fixed_overhead_s: T_pass_fixed, added to every forward pass of every model (scheduling, sampling,
        input preparation), seconds (MODEL.md 1.2; 0 in the pure roofline).
      layer_overhead_s: t_layer, added per decoder layer to every pass (kernel launches and ramp-up).
      draft_overhead_s: T_draft_fixed, added to every draft pass of a drafter that runs a model.
      step_overhead_s: T_step_fixed, added once per speculative step (rejection sampling, KV
        bookkeeping). The last four are engine terms: an engine profile sets them with eta_F, eta_W.
      non_overlap: sigma in [0, 1]; an operator takes max(t_math, t_mem) + sigma min(t_math, t_mem):
        0 is the roofline of MODEL.md (perfect overlap), 1 the scaling book's upper bound (sum).
      roofline: static; "operator" (max per operator, summed) or "pass" (one max per pass).
    """

    flops_per_s: float
    hbm_bytes_per_s: float
    hbm_bytes: float
    link_bytes_per_s: float
    link_latency_s: float
    flops_efficiency: float = 1.0
    hbm_efficiency: float = 1.0
    fixed_overhead_s: float = 0.0
    layer_overhead_s: float = 0.0
    draft_overhead_s: float = 0.0
    step_overhead_s: float = 0.0
    non_overlap: float = 0.0
    roofline: str = static("operator")

    def __post_init__(self):
        if self.roofline not in MODES:
            raise ValueError(f"roofline={self.roofline!r}; expected one of {MODES}")

    @property
    def critical_intensity(self):
        """FLOP per byte above which a pass is compute-bound (achieved rates)."""
        return (self.flops_per_s * self.flops_efficiency) / (self.hbm_bytes_per_s * self.hbm_efficiency)


@pytree_dataclass
class Deployment:
    """How one model replica is laid out (MODEL.md 1.1).

    Attributes:
      tp: tensor-parallel degree t (GPUs per replica): weights, FLOPs and KV heads split t ways.
      memory_fraction: usable fraction u of each GPU's HBM.
    """

    tp: float = 1.0
    memory_fraction: float = 0.9

    def operator_shards(self):
        """GPUs each operator class is split over, in `roofline.operator_costs` order (dense weights,
        LM head, routed experts, full attention, windowed attention): the seam where expert
        parallelism and attention data parallelism change the per-GPU share."""
        return (self.tp,) * 5

    @property
    def gpus(self):
        """GPUs of one replica (memory budget = gpus x HBM x memory_fraction)."""
        return self.tp

    @classmethod
    def single(cls, dtype=jnp.float32):
        """One GPU, 0.9 of its memory usable."""
        return cls(tp=jnp.asarray(1.0, dtype), memory_fraction=jnp.asarray(0.9, dtype))


@pytree_dataclass
class Model:
    """Cost-relevant shape of one model replica (counts are weights; bytes per element per group).

    Attributes:
      d_model: hidden size (all-reduce payload per token is d_model * 2 bytes).
      n_layers: decoder layers (two all-reduces each under tensor parallelism).
      p_dense: params read every pass at `b_dense` (attention, dense FFN, shared experts, routers).
      b_dense: bytes per dense param.
      p_head: LM-head params, read every pass. b_head: bytes per head param.
      head_resident: 1 if this replica stores the head, 0 if it reuses the target's (EAGLE-1, MTP).
      p_stored: params stored but not read per pass (untied embedding, encoder, ...), at `b_head`.
      n_moe_layers, n_experts, top_k: routed-expert layout (E experts, r routed per token).
      p_expert: params of one routed expert. b_expert: bytes per expert param.
      n_full_layers, n_window_layers, window: attention layers over the full context, and over
        min(context, window) tokens.
      attn_flops_per_ctx: FLOPs per query token per cached token per layer (4*h*d_h; MLA absorbed).
      kv_elems_per_tok: K+V elements per token per layer. b_kv: bytes per KV element.
      kv_heads: how many ways tensor parallelism can split the KV cache (KV heads; 1 for MLA, whose
        latent every head reads): per-GPU KV is the replica's over min(tp, kv_heads).
    """

    d_model: float
    n_layers: float
    p_dense: float
    b_dense: float
    p_head: float
    b_head: float
    head_resident: float
    p_stored: float
    n_moe_layers: float
    n_experts: float
    top_k: float
    p_expert: float
    b_expert: float
    n_full_layers: float
    n_window_layers: float
    window: float
    attn_flops_per_ctx: float
    kv_elems_per_tok: float
    b_kv: float
    kv_heads: float = 1.0

    @classmethod
    def zeros(cls, dtype=jnp.float32):
        """A model with no cost and no memory (the drafter of n-gram and cost-ratio speculation)."""
        return cls(**{k: jnp.asarray(0.0, dtype) for k in cls.field_names})

    @property
    def has_weights(self):
        """True for a model that runs passes (False for `Model.zeros()`: n-gram and ratio drafters)."""
        return (self.p_dense + self.p_head + self.p_expert) > 0

    @property
    def total_params(self):
        """All stored weight params (experts, embedding and a resident head included)."""
        return (self.p_dense + self.p_head * self.head_resident + self.p_stored
                + self.n_moe_layers * self.n_experts * self.p_expert)

    @property
    def active_params(self):
        """Params read for one token: dense + head + top-r experts per MoE layer (no embedding)."""
        return self.p_dense + self.p_head + self.n_moe_layers * self.top_k * self.p_expert

    def kv_split(self, tp):
        """GPUs a replica's KV cache is split over under tensor parallelism `tp`: min(tp, kv_heads), >= 1."""
        return jnp.maximum(jnp.minimum(tp, self.kv_heads), 1.0)

    @property
    def weight_bytes(self):
        """Bytes of weights this replica stores (all GPUs of the replica together)."""
        return (self.p_dense * self.b_dense + (self.p_head * self.head_resident + self.p_stored) * self.b_head
                + self.n_moe_layers * self.n_experts * self.p_expert * self.b_expert)


@pytree_dataclass
class Decode:
    """The operating point (all leaves).

    Attributes:
      batch: decode batch B (sequences), >= 1, may be real in kernels.
      k: draft length (tokens proposed per step), >= 0, may be real.
      alpha: per-token acceptance rate in [0, 1].
      context: tokens already in each sequence's KV cache (L).
      draft_cost_ratio: c, extra draft-pass cost as a fraction of T_target(B, 1).
      expert_locality: a workload property: 0 = sequences route independently (uniform routing,
        MODEL.md); 1 = all sequences of a batch route identically (one prompt copied B times under
        greedy decoding). Distinct experts are those of n_eff = q (1 + (1 - lambda)(B - 1)) tokens.
    """

    batch: float
    k: float
    alpha: float
    context: float
    draft_cost_ratio: float = 0.0
    expert_locality: float = 0.0

