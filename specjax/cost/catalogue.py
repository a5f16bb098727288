"""The one catalogue of continuous inputs: name, unit, allowed range, where it lives in the pytrees,
its result-grid column, and whether it is a sweep axis, a sensitivity input, a key of hardware
profile files and a calibrated parameter (with its fitting bounds).

Every entry point reads this table: CLI flags and `Scenario` (range checks), sweep specs (axes and
`[fixed]` keys, grid building), sensitivities (which leaves to differentiate), hardware profile
files (which keys exist, their ranges, what a calibrated profile writes) and calibration (bounds).
Trees: "hw" (Hardware: silicon and engine terms), "deploy" (Deployment), "target" / "draft"
(Model), "op" (Decode, the operating point), "load" (Decode.load, the serving load of MODEL.md 6).
"""

import dataclasses
import math
import re

from ..errors import field_error

TREES = ("hw", "deploy", "target", "draft", "op")


@dataclasses.dataclass(frozen=True)
class Input:
    """One continuous input.

    Attributes:
      name: the user-facing name (`--flag-name`, spec key, sensitivity key, column stem).
      tree, leaves: where it lives. One leaf is a plain value; several leaves are one uniform
        scaling (sensitivity only, e.g. `target_size`); no leaves means it is derived when applied
        (accepted_length -> alpha, expert_granularity -> E, r, P_e). In a scaling, "draft.b_kv" names
        a leaf of another tree and "p_head*head_resident" a leaf scaled only as far as a 0/1 leaf says
        (an EAGLE-1 or MTP head borrows the target's LM head: scaling the drafter leaves it alone).
      lo, hi: the allowed closed range (`lo_open`: lo itself excluded). unit: for messages and docs.
      column: result-grid column (units in the name); None: not a column.
      axis: may be a sweep axis. fixed: may be a `[fixed]` key of a sweep spec.
      sensitivity: an input of `sensitivity` (elasticities of B*).
      profile: a key of hardware/engine profile files (tree "hw").
      fit: calibration bounds (lo, hi) where calibration may fit it, else None.
      integer: only whole numbers are allowed. symbol: the name used in range messages (default name).
      engine: a key of engine profiles (MODEL.md 1.2): "efficiency" (an achieved fraction of the silicon,
        which transfers across engines) or "overhead" (the engine's software: host scheduling, launches,
        bookkeeping, measured to differ several-fold between engines); None for other inputs.
      typical: a typical value; a positive value out of range gets a "did you mean" hint that
        rescales it by a power of 1000 towards it (a unit mistake: TB/s written as 3.2).
    """

    name: str
    tree: str
    leaves: tuple
    lo: float
    hi: float
    unit: str = ""
    column: str | None = None
    axis: bool = True
    fixed: bool = False
    sensitivity: bool = True
    profile: bool = False
    fit: tuple | None = None
    integer: bool = False
    lo_open: bool = False
    symbol: str = ""
    engine: str | None = None
    typical: float | None = None

    @property
    def leaf(self):
        """The single leaf of a plain input (None for derived or grouped inputs)."""
        return self.leaves[0] if len(self.leaves) == 1 else None

    def ok(self, value):
        """True if `value` is a finite number inside the allowed range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        return (self.lo < value if self.lo_open else self.lo <= value) and value <= self.hi

    def range_text(self):
        """E.g. "0 <= alpha <= 1 (per-token acceptance)"."""
        what = "an integer " if self.integer else ""
        unit = f" ({self.unit})" if self.unit else ""
        return (f"{what}{_short(self.lo)} {'<' if self.lo_open else '<='} {self.symbol or self.name} <= "
                f"{_short(self.hi)}{unit}")

    def check(self, value, source=None, field=None):
        """Return `value` as a float, or raise a `SpecError` naming the field, value and range (and,
        for a value off by a power of 1000, the value it probably meant)."""
        if not self.ok(value):
            raise field_error(field or self.name, value, self.range_text() + self._hint(value), source)
        return float(value)

    def _hint(self, value):
        if self.typical is None or isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            return ""
        options = [3 * i for i in range(-6, 7) if self.ok(value * 10.0 ** (3 * i))]
        if not options:
            return ""
        e = min(options, key=lambda i: abs(math.log10(value) + i - math.log10(self.typical)))
        return f"; did you mean {value:g}e{e}?" if e else ""


def _short(v):
    """1e8 rather than 1e+08 in messages."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m[1].replace("+", "") + m[2], f"{v:g}")


def _i(name, tree, leaves, lo, hi, unit="", column=None, **kw):
    leaves = (leaves,) if isinstance(leaves, str) else tuple(leaves)
    return Input(name, tree, leaves, float(lo), float(hi), unit, column if column is not None else name, **kw)


_ALL = (
    # the operating point
    _i("batch", "op", "batch", 1, 1e8, "sequences", "batch_seqs", fixed=True, sensitivity=False),
    _i("k", "op", "k", 0, 64, "draft tokens per step", "k_tokens", fixed=True),
    _i("alpha", "op", "alpha", 0, 1, "per-token acceptance", fixed=True),
    _i("accepted_length", "op", (), 1, 65, "tokens per step incl. the bonus token", "accepted_length_tokens",
       fixed=True, sensitivity=False),
    _i("context", "op", "context", 0, 1e8, "tokens in each sequence's KV cache", "context_tokens", fixed=True),
    _i("draft_cost", "op", "draft_cost_ratio", 0, 10, "draft pass / target pass", "draft_cost_ratio", symbol="c"),
    _i("tree_topk", "op", "tree_topk", 1, 64, "draft-tree branching per step (1: a chain)", fixed=True,
       integer=True, sensitivity=False),
    _i("tree_tokens", "op", "tree_tokens", 2, 4096, "tokens verified per sequence, root included",
       "tree_tokens", fixed=True, integer=True, sensitivity=False),
    _i("draft_kv_budget", "op", "draft_kv_budget", 1, 1e9, "tokens of KV the drafter keeps per layer",
       "draft_kv_budget_tokens", fixed=True, sensitivity=False),
    _i("expert_locality", "op", "expert_locality", 0, 1, "workload: 0 independent routing, 1 identical",
       fixed=True),
    # the serving load (MODEL.md 6): inputs of the serving reductions and `specjax serve`
    _i("qps", "load", "qps", 0, 1e7, "requests/s", "qps_req_s", fixed=True, sensitivity=False, lo_open=True),
    _i("concurrency", "load", "concurrency", 1, 1e8, "clients of a closed loop (requests in flight)",
       "concurrency_reqs", fixed=True, sensitivity=False, integer=True),
    _i("input_len", "load", "input_len", 1, 1e7, "prompt tokens per request", "input_len_tokens", fixed=True,
       sensitivity=False),
    _i("output_len", "load", "output_len", 1, 1e7, "output tokens per request", "output_len_tokens", fixed=True,
       sensitivity=False),
    _i("max_num_seqs", "load", "max_num_seqs", 1, 1e8, "the engine's batch cap (sequences)", fixed=True,
       sensitivity=False, integer=True),
    _i("chunk_tokens", "load", "chunk_tokens", 1, 1e8, "prompt tokens prefilled per iteration", fixed=True,
       sensitivity=False, integer=True),
    # the deployment
    _i("tp", "deploy", "tp", 1, 4096, "attention tensor-parallel GPUs (per attention-DP rank)", "tp_gpus",
       fixed=True, integer=True),
    _i("ep", "deploy", "ep", 1, 4096, "expert-parallel degree of the MoE layers", "ep_gpus", fixed=True,
       integer=True, sensitivity=False),
    _i("dp_attention", "deploy", "dp_attention", 1, 4096, "attention data-parallel ranks", "dp_attention_ranks",
       fixed=True, integer=True, sensitivity=False, symbol="d_a"),
    _i("draft_tp", "deploy", "draft_tp", 1, 4096, "the drafter's tensor-parallel degree", "draft_tp_gpus",
       fixed=True, integer=True, sensitivity=False),
    _i("expert_imbalance", "deploy", "expert_imbalance", 1, 64, "busiest rank's expert work / mean", fixed=True),
    _i("memory_fraction", "deploy", "memory_fraction", 0, 1, "usable fraction of HBM", fixed=True,
       sensitivity=False, lo_open=True, symbol="u"),
    # the hardware and its engine terms
    # physical ranges of real accelerators (a value outside is a unit mistake: 3.2 meant 3.2e12 bytes/s)
    _i("flops_per_s", "hw", "flops_per_s", 1e10, 1e18, "FLOP/s", typical=1e15),
    _i("hbm_bytes_per_s", "hw", "hbm_bytes_per_s", 1e9, 1e15, "bytes/s", profile=True, typical=3e12),
    _i("hbm_bytes", "hw", "hbm_bytes", 1e8, 1e13, "bytes", sensitivity=False, profile=True, typical=8e10),
    _i("link_bytes_per_s", "hw", "link_bytes_per_s", 1e8, 1e14, "bytes/s, one direction", profile=True,
       typical=4e11),
    _i("link_latency_s", "hw", "link_latency_s", 0, 1, "seconds per all-reduce", profile=True),
    _i("gpus_per_node", "hw", "gpus_per_node", 1, 1e5, "GPUs one NVLink-class domain joins", profile=True,
       integer=True, sensitivity=False),
    _i("internode_bytes_per_s", "hw", "internode_bytes_per_s", 1e8, 1e14, "bytes/s, one direction, per GPU",
       profile=True, typical=5e10),
    _i("internode_latency_s", "hw", "internode_latency_s", 0, 1, "seconds per inter-node collective",
       profile=True),
    _i("flops_efficiency", "hw", "flops_efficiency", 0, 1, "achieved / peak FLOP/s", profile=True,
       fit=(0.3, 1.0), lo_open=True, engine="efficiency"),
    _i("hbm_efficiency", "hw", "hbm_efficiency", 0, 1, "achieved / peak bytes/s", profile=True, fit=(0.7, 1.0),
       lo_open=True, engine="efficiency"),
    _i("fixed_overhead_s", "hw", "fixed_overhead_s", 0, 1, "seconds per forward pass", profile=True,
       fit=(0.0, 5e-3), engine="overhead"),
    _i("layer_overhead_s", "hw", "layer_overhead_s", 0, 1e-2, "seconds per layer per pass", profile=True,
       fit=(0.0, 3e-4), engine="overhead"),
    _i("kernel_overhead_s", "hw", "kernel_overhead_s", 0, 1e-3, "seconds per kernel per pass", profile=True,
       fit=(0.0, 2e-5), engine="overhead"),
    _i("draft_overhead_s", "hw", "draft_overhead_s", 0, 1, "seconds per draft pass", profile=True,
       fit=(0.0, 3e-3), engine="overhead"),
    _i("step_overhead_s", "hw", "step_overhead_s", 0, 1, "seconds per speculative step", profile=True,
       fit=(0.0, 5e-3), engine="overhead"),
    _i("non_overlap", "hw", "non_overlap", 0, 1, "0 roofline, 1 sum of math and memory", profile=True,
       fit=(0.0, 1.0), engine="efficiency"),
    _i("prefill_efficiency", "hw", "prefill_efficiency", 0, 1, "achieved / peak FLOP/s of prefill (eta_P)",
       profile=True, fit=(0.2, 1.0), lo_open=True, engine="efficiency"),
    # the target's shape
    _i("n_experts", "target", "n_experts", 1, 1e6, "routed experts E"),
    _i("top_k", "target", "top_k", 1, 1e6, "experts per token r"),
    _i("expert_granularity", "target", (), 1e-6, 1e6, "E and r times g, expert size / g", sensitivity=False),
    _i("window", "target", "window", 1, 1e9, "sliding-window tokens", "window_tokens", sensitivity=False),
    _i("expert_size", "target", "p_expert", 0, 1e15, "params per expert", axis=False),
    _i("target_size", "target", ("p_dense", "p_head", "p_expert"), 0, 1e15, "scale of all weights", axis=False),
    _i("kv_bytes", "target", ("b_kv", "draft.b_kv"), 0, 8, "scale of the KV bytes of target and drafter",
       axis=False),
    _i("draft_size", "draft", ("p_dense", "p_head*head_resident", "p_expert"), 0, 1e15,
       "scale of the drafter's own weights", axis=False),
)

INPUTS = {i.name: i for i in _ALL}
AXES = {n: i for n, i in INPUTS.items() if i.axis}
FIXED = {n: i for n, i in INPUTS.items() if i.fixed}
SENSITIVITY = {n: i for n, i in INPUTS.items() if i.sensitivity}
PROFILE = {n: i for n, i in INPUTS.items() if i.profile}
FIT = {n: i for n, i in INPUTS.items() if i.fit}
ENGINE = {n: i for n, i in INPUTS.items() if i.engine}
OVERHEADS = {n: i for n, i in ENGINE.items() if i.engine == "overhead"}
LOAD = {n: i for n, i in INPUTS.items() if i.tree == "load"}
EXPERT_HOLD = ("expert_size", "footprint")


def column(name):
    """Result-grid column of an input (units in the name)."""
    return INPUTS[name].column


def check(name, value, source=None, field=None):
    """Range-check `value` for input `name` (see `Input.check`)."""
    return INPUTS[name].check(value, source, field)
