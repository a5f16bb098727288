"""The kernels' inputs as pytrees, in the order every kernel takes them (docs/model.md §1):

  (Hardware, Deployment, target Model, draft Model, Decode)

`Hardware` is the accelerator as an engine drives it (silicon rates, achieved fractions, overheads,
and the roofline mode as a static field); `Deployment` is how a replica is laid out on GPUs;
`Model` the cost-relevant shape of one model replica; `Decode` the operating point. Every numeric
field is a leaf (vmap, grad); builders live in `hardware`, `models` and `scenario`.
"""

import dataclasses

import jax.numpy as jnp

from . import params
from ._pytree import pytree_dataclass, static
from .acceptance import TREE_MAX_DEPTH

from .modes import MODES

LAYOUT_FIELDS = ("ep", "dp_attention", "draft_tp")  # what `Deployment.parallel` depends on


@pytree_dataclass
class Hardware:
    """One accelerator as seen by the kernels (SI units in the names).

    Attributes:
      flops_per_s: peak dense FLOP/s for the compute dtype, one GPU.
      hbm_bytes_per_s: HBM bandwidth, bytes/s, one GPU.
      hbm_bytes: HBM capacity, bytes, one GPU.
      link_bytes_per_s: interconnect bandwidth, one direction, bytes/s, one GPU.
      link_latency_s: latency added to each all-reduce or all-to-all, seconds.
      gpus_per_node: GPUs one NVLink-class domain joins (8 in an HGX node, 72 in an NVL72 rack); a
        collective over more GPUs runs over the inter-node network (docs/model.md §2.5).
      internode_bytes_per_s: inter-node network bandwidth, one direction, bytes/s, one GPU.
      internode_latency_s: latency of a collective that crosses nodes, seconds.
      flops_efficiency: achieved fraction of `flops_per_s` (eta_F).
      hbm_efficiency: achieved fraction of `hbm_bytes_per_s` (eta_W).
      fixed_overhead_s: T_pass_fixed, added to every forward pass of every model (scheduling, sampling,
        input preparation), seconds (docs/model.md §2.6; 0 in the pure roofline).
      layer_overhead_s: t_layer, added per decoder layer to every pass (kernel launches and ramp-up).
      kernel_overhead_s: t_kernel, added per kernel a pass launches (`Model.n_kernels`: the launch gap
        and ramp-up of each kernel, so that a layer of many small kernels costs more than one of few).
      draft_overhead_s: T_draft_fixed, added to every draft pass of a drafter that runs a model.
      step_overhead_s: T_step_fixed, added once per speculative step (rejection sampling, KV
        bookkeeping). The last five are engine terms: an engine profile sets them with eta_F, eta_W.
      non_overlap: sigma in [0, 1]; an operator takes max(t_math, t_mem) + sigma min(t_math, t_mem):
        0 is the ideal roofline (docs/model.md §2.3: perfect overlap), 1 the scaling book's upper bound (sum).
      prefill_efficiency: eta_P, the achieved fraction of `flops_per_s` of prefill (its own: prefill GEMMs
        are large and run nearer peak than decode); what a prompt token's FLOPs run at (docs/model.md §3,
        `cost.prefill`). 1 in the pure roofline; no per-batch step uses it.
      activation_traffic: d_model-wide 16-bit activation vectors each token reads or writes per layer
        outside the weight GEMMs (norms, residuals, rotary, quantisation, sampling: docs/model.md §2.7), charged at
        eta_W W on every GPU that holds the token (tensor parallelism replicates them). 0 in the pure roofline.
      expert_traffic: the same per token per routed expert in every MoE layer (the dispatch copy of each
        token to its r experts, the expert intermediate, the combine), on the expert-parallel rank that
        runs it. 0 in the pure roofline.
      roofline: static; "operator" (max per operator, summed) or "pass" (one max per pass).
    """

    flops_per_s: float
    hbm_bytes_per_s: float
    hbm_bytes: float
    link_bytes_per_s: float
    link_latency_s: float
    gpus_per_node: float = 8.0
    internode_bytes_per_s: float = 5e10
    internode_latency_s: float = 1e-5
    flops_efficiency: float = 1.0
    hbm_efficiency: float = 1.0
    fixed_overhead_s: float = 0.0
    layer_overhead_s: float = 0.0
    kernel_overhead_s: float = 0.0
    draft_overhead_s: float = 0.0
    step_overhead_s: float = 0.0
    non_overlap: float = 0.0
    prefill_efficiency: float = 1.0
    activation_traffic: float = 0.0
    expert_traffic: float = 0.0
    roofline: str = static("operator")

    def __post_init__(self):
        if self.roofline not in MODES:
            raise ValueError(f"roofline={self.roofline!r}; expected one of {MODES}")

    @property
    def critical_intensity(self):
        """FLOP per byte above which a pass is compute-bound (achieved rates)."""
        return (self.flops_per_s * self.flops_efficiency) / (self.hbm_bytes_per_s * self.hbm_efficiency)


def layout_divides(tp, ep, dp_attention, draft_tp, n_experts):
    """True where ep divides the replica's tp x dp_attention GPUs and the routed experts (0 for a dense
    model), and draft_tp (0: the target's layout) divides the GPUs. Host numbers or traced arrays: the
    sweep spec and the device grid apply the same rule (combinations that fail are invalid_input rows)."""
    gpus = tp * dp_attention
    return (gpus % ep == 0) & (n_experts % ep == 0) & ((draft_tp == 0) | (gpus % jnp.maximum(draft_tp, 1) == 0))


@pytree_dataclass
class Deployment:
    """How one model replica is laid out on GPUs (docs/model.md §2.4).

    A replica has `gpus` = tp x dp_attention GPUs. Attention runs `dp_attention` data-parallel ranks,
    each tensor-parallel over `tp` GPUs and holding the KV of batch / dp_attention sequences. Dense
    FFN layers, shared experts, routers and the LM head see the tokens of all ranks and are split over
    all `gpus`. Routed experts are split `ep` ways (E / ep experts per rank) and each expert
    tensor-parallel over gpus / ep GPUs. ep = dp_attention = 1 is pure tensor parallelism.

    Attributes:
      tp: attention tensor-parallel degree t (per attention-DP rank).
      memory_fraction: usable fraction u of each GPU's HBM.
      ep: expert-parallel degree e of the MoE layers (divides E and gpus).
      dp_attention: attention data-parallel degree d_a.
      draft_tp: the drafter's own tensor-parallel degree (vLLM `draft_tensor_parallel_size`; it runs on
        draft_tp of the replica's GPUs, pure TP); 0 means the drafter uses the target's layout.
      expert_imbalance: >= 1; the busiest rank's routed-expert work over the mean (1: uniform routing).
      parallel: static; which kernels run. True (the default) runs the general layout kernels, right for
        every layout. False is the fast path for pure tensor parallelism (ep = dp_attention = 1, the
        drafter in the target's layout), which skips the expert-parallel collectives and per-model
        layouts entirely: only builders that know the layout from plain numbers set it (`pure_tp`,
        `Scenario.build`). It is never read off leaf values; `replace` of ep, dp_attention or draft_tp
        on a fast-path deployment returns a general one (a what-if under vmap stays right).
    """

    tp: float = 1.0
    memory_fraction: float = 0.9
    ep: float = 1.0
    dp_attention: float = 1.0
    draft_tp: float = 0.0
    expert_imbalance: float = 1.0
    parallel: bool = static(True)

    def replace(self, **kw):
        """A what-if copy; changing the layout (ep, dp_attention, draft_tp) leaves the pure-TP fast path."""
        if not self.parallel and "parallel" not in kw and any(n in kw for n in LAYOUT_FIELDS):
            kw["parallel"] = True
        return dataclasses.replace(self, **kw)

    @staticmethod
    def pure_tp(ep, dp_attention, draft_tp):
        """True when a layout given as plain numbers is pure tensor parallelism (the fast-path kernels)."""
        return float(ep) == 1.0 and float(dp_attention) == 1.0 and not draft_tp

    @property
    def gpus(self):
        """GPUs of one replica: tp x dp_attention (memory budget = gpus x HBM x memory_fraction)."""
        return self.tp * self.dp_attention

    @property
    def expert_tp(self):
        """GPUs each routed expert is split over: gpus / ep."""
        return self.gpus / self.ep

    def drafter(self):
        """The drafter's layout: the target's when `draft_tp` is 0, else pure TP over draft_tp GPUs.
        Leaf-wise `where`, so draft_tp may be a vmapped axis."""
        if not self.parallel:
            return self
        own = self.draft_tp > 0
        one = jnp.ones_like(self.tp)
        return self.replace(tp=jnp.where(own, self.draft_tp, self.tp), ep=jnp.where(own, one, self.ep),
                            dp_attention=jnp.where(own, one, self.dp_attention))

    @classmethod
    def single(cls, dtype=jnp.float32):
        """One GPU, 0.9 of its memory usable."""
        return cls(**{k: jnp.asarray(v, dtype) for k, v in
                      dict(tp=1.0, memory_fraction=0.9, ep=1.0, dp_attention=1.0, draft_tp=0.0,
                           expert_imbalance=1.0).items()}, parallel=False)


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
      p_attn: the part of `p_dense` in attention projections; under attention data parallelism each
        DP rank holds and reads its own copy (docs/model.md §2.4).
      weights_resident: 1 if this replica stores its weights, 0 if it reads another's (the drafter of
        self-speculation is the target itself: its passes read every weight, it stores none).
      n_kernels: kernels one pass launches (`config.Architecture.kernels`: a pinned count per layer
        kind), what `Hardware.kernel_overhead_s` multiplies.
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
    p_attn: float = 0.0
    weights_resident: float = 1.0
    n_kernels: float = 0.0

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
        """All stored weight params (experts, embedding and a resident head included; `params`)."""
        return params.total_params(self)

    @property
    def active_params(self):
        """Params read for one token: dense + head + top-r experts per MoE layer (no embedding; `params`)."""
        return params.active_params(self)

    def kv_split(self, tp):
        """GPUs a replica's KV cache is split over under tensor parallelism `tp`: min(tp, kv_heads), >= 1."""
        return jnp.maximum(jnp.minimum(tp, self.kv_heads), 1.0)

    @property
    def weight_bytes(self):
        """Bytes of weights this replica stores (all GPUs of the replica together)."""
        return (self.p_dense * self.b_dense + (self.p_head * self.head_resident + self.p_stored) * self.b_head
                + self.n_moe_layers * self.n_experts * self.p_expert * self.b_expert) * self.weights_resident


@pytree_dataclass
class Load:
    """A serving load (docs/model.md §10): requests arriving at `qps` per second, each with `input_len` prompt
    tokens and `output_len` generated tokens, served by continuous batching of at most `max_num_seqs`
    sequences, with chunked prefill of at most `chunk_tokens` prompt tokens per engine iteration.

    Attributes:
      qps: request rate lambda (requests/s), > 0.
      input_len, output_len: mean prompt and output lengths L_in, L_out (tokens).
      max_num_seqs: the engine's batch cap (vLLM `max_num_seqs`); the memory-feasible batch caps it too.
      chunk_tokens: prompt tokens one iteration prefills (vLLM `max_num_batched_tokens`): a prompt
        takes ceil(L_in / chunk_tokens) iterations before its first token.
      concurrency: N, the clients of a closed loop (docs/model.md §11: each sends its next request when its
        last one ends; `search.concurrency`); the open-loop functions read `qps` instead.
      plain_max_num_seqs: the plain server's batch cap where the engine's default differs from its
        speculative server's (SGLang: 48 running requests with speculation, its request pool without);
        NaN: the same as `max_num_seqs` (a cap the user gives applies to both).
      acceptance_spread: sigma, the standard deviation of a request's log-odds of acceptance around the
        scenario's (docs/model.md §10.1, `cost.spread`); 0: every request accepts alike. Only the TPOT
        percentiles read it: the means (batch, throughput, mean TPOT) are the scenario's aggregate tau.
    """

    qps: float
    input_len: float
    output_len: float
    max_num_seqs: float = 256.0
    chunk_tokens: float = 2048.0
    concurrency: float = 1.0
    plain_max_num_seqs: float = float("nan")
    acceptance_spread: float = 0.0

    @property
    def caps(self):
        """(2,) batch caps of the plain and the speculative server (`plain_max_num_seqs`, `max_num_seqs`)."""
        plain = jnp.where(jnp.isnan(self.plain_max_num_seqs), self.max_num_seqs, self.plain_max_num_seqs)
        return jnp.stack([plain, jnp.broadcast_to(self.max_num_seqs, plain.shape)], axis=-1)

    @property
    def decode_context(self):
        """Mean KV tokens of a sequence over its decode: L_in + L_out / 2 (the context of every step)."""
        return self.input_len + 0.5 * self.output_len


@pytree_dataclass
class Decode:
    """The operating point (all leaves).

    Attributes:
      batch: decode batch B (sequences), >= 1, may be real in kernels.
      k: draft length (tokens proposed per step; the depth of a draft tree), >= 0, may be real.
      alpha: per-token acceptance rate in [0, 1] (with `rates`: its first entry, for reporting).
      context: tokens already in each sequence's KV cache (L).
      draft_cost_ratio: c, extra draft-pass cost as a fraction of T_target(B, 1).
      expert_locality: a workload property: 0 = sequences route independently (uniform routing,
        docs/model.md §2.2); 1 = all sequences of a batch route identically (one prompt copied B times under
        greedy decoding). Distinct experts are those of n_eff = q (1 + (1 - lambda)(B - 1)) tokens.
      draft_kv_budget: None (the drafter keeps all of its KV) or the tokens of KV it keeps and reads per
        layer, min(L, b) (docs/model.md §5.2). Like `rates` and the tree, None is part of the tree structure.
      draft_passes: None (a chain drafter: k sequential passes over B tokens) or, per point, the passes p
        of a parallel drafter (docs/model.md §5.1: PARD, P-EAGLE, DFlash), each over B x k tokens; 0 marks a
        chain point among parallel ones (rows of a measurement file stacked together).
      rates: None (i.i.d. alpha) or the conditional acceptance of each draft position a_1..a_V (last
        axis; docs/model.md §4.3). Whether it is None is part of the tree structure: each compiles once.
      tree_topk, tree_tokens: None (a chain) or a draft tree of depth k, branching `tree_topk`,
        verifying `tree_tokens` tokens per sequence, root included (docs/model.md §4.4).
      load: None (the point is a batch) or a `Load`: the serving load whose fixed point gives the batch
        (docs/model.md §10; `search.serving`). The per-batch kernels ignore it.
      tree_max_depth: static; the deepest tree the tau estimate unrolls (a point deeper than it is
        invalid_input). 16 (`acceptance.TREE_MAX_DEPTH`) unless the builder knows less: a scenario's
        own depth, a sweep's largest k; each level costs a few transcendentals per point.
    """

    batch: float
    k: float
    alpha: float
    context: float
    draft_cost_ratio: float = 0.0
    expert_locality: float = 0.0
    draft_kv_budget: object = None
    draft_passes: object = None
    rates: object = None
    tree_topk: object = None
    tree_tokens: object = None
    load: object = None
    tree_max_depth: int = static(TREE_MAX_DEPTH)

    @property
    def is_tree(self):
        return self.tree_topk is not None

    @property
    def tree_is_chain(self):
        """Where a tree's shape is the chain's (topk 1, k + 1 tokens): its numbers are the chain's, exactly."""
        return (self.tree_topk == 1.0) & (self.tree_tokens == self.k + 1.0)

    def rate_at(self, position):
        """Conditional acceptance of draft position `position` (1-based, static): alpha, or the vector's
        entry (its last entry beyond its length)."""
        if self.rates is None:
            return self.alpha
        return self.rates[..., min(position, self.rates.shape[-1]) - 1]

    def draft_context(self, tokens):
        """KV tokens the drafter reads or stores for `tokens` of context: min(tokens, budget)."""
        return tokens if self.draft_kv_budget is None else jnp.minimum(tokens, self.draft_kv_budget)

    @property
    def is_parallel(self):
        """True when some point of this operating point drafts in parallel (`draft_passes` given)."""
        return self.draft_passes is not None

    @property
    def verify_tokens(self):
        """Tokens per sequence the target verifies: k + 1 for a chain, `tree_tokens` for a tree."""
        return self.k + 1.0 if self.tree_tokens is None else self.tree_tokens
