"""The one schema of everything a user can say: one row per input, read by every entry point.

A row gives the input's kind (a number, a choice, a preset-or-file name, a storage dtype, a vector of
rates), its default, a one-line help, its group (system, operating point, load), its allowed range,
and where it goes: a `Scenario` field and a shared model flag of the CLI (`flag`), a key of sweep
pairs (`pair`), `[fixed]` and `[axes]` (`fixed`, `axis`), a measurements-CSV column (`csv`, with its
own range only where it truly differs), the JSON `inputs` echo (`echo`), a sensitivity input, a key of
hardware and engine profile files (`profile`, `engine`) and a calibrated parameter (`fit` bounds,
`prior` held when the data cannot identify it, `start` of the search).

Derived from it, never restated: `Scenario`'s fields, defaults and per-field checks
(`inputs.scenario`), the CLI's model and load flags of every command (`cli.flags`), the spec's pair,
fixed and axis keys (`inputs.spec`), the CSV's input columns and ranges (`inputs.measured`), the JSON
echo (`api.inputs`), sensitivities, profile keys and calibration (`engine.calibrate`). Only rules
between fields stay hand-written, as named functions where they apply.

Trees: "hw" (Hardware: silicon and engine terms), "deploy" (Deployment), "target" / "draft" (Model),
"op" (Decode, the operating point), "load" (Decode.load, the serving load of docs/model.md §10); "" for an
input that is not a leaf (a name, a choice, a vector). This module sits above `cost/` (it names the
trees' leaves); nothing in `cost/` imports it.
"""

import dataclasses
import math
import re

from .cost.modes import MODES
from .errors import field_error

TREES = ("hw", "deploy", "target", "draft", "op", "load")
GROUPS = ("system", "point", "load")  # help panels: what runs where, the operating point, the serving load
KINDS = ("number", "choice", "registered", "name", "dtype", "rates")
REQUIRED = dataclasses.MISSING  # the default of an input every scenario must give (target, hardware)


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
      engine: a key of engine profiles (docs/model.md §2.6): "efficiency" (an achieved fraction of the silicon,
        which transfers across engines), "per_token" (bytes each token moves outside the weight GEMMs, in
        d_model-wide vectors: a property of the engine's kernels, charged at the silicon's bandwidth) or
        "overhead" (the engine's software: host scheduling, launches, bookkeeping, measured to differ
        several-fold between engines); None for other inputs.
      typical: a typical value; a positive value out of range gets a "did you mean" hint that
        rescales it by a power of 1000 towards it (a unit mistake: TB/s written as 3.2).
      kind: "number" (a range), "choice" (one of `choices`), "registered" (a name in the registry its
        module keeps: the drafter kinds), "name" (a preset slug or a file path, checked by its loader),
        "dtype" (a storage dtype) or "rates" (a list of rates in [0, 1]).
      default: the value when not given (`REQUIRED`: every scenario gives it; None: optional).
      help: one line for `--help` and the docs. group: "system", "point" or "load".
      scenario: a `Scenario` field (and echoed in JSON `inputs` unless `echo` is False).
      flag: a CLI option: "model" (every model command), "load" (the serving commands) or None.
      pair: a key of a sweep spec's [[pairs]] tables.
      csv: the measurements-CSV column of this input (None: not a column); csv_range: the fields of the
        range (lo, hi, integer) only where the CSV's truly differ (a measured k is a whole number >= 1).
      prior, start: for a calibrated term, the value held when the data cannot identify it and the
        start of the search.
      choices: the allowed values of a "choice" input.
      flag_default: the CLI's default where it is not `default` (a serving command needs a load: its
        lengths default to vllm bench serve's random dataset; a scenario without one is a decode batch).
      whole: users give it as a whole number (a CLI flag and a CSV cell take integers) though the model
        treats it as continuous (sweep axes, the optax search over k).
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
    kind: str = "number"
    default: object = None
    help: str = ""
    group: str = "point"
    scenario: bool = False
    flag: str | None = None
    pair: bool = False
    csv: str | None = None
    csv_range: dict | None = None
    echo: bool = True
    prior: float | None = None
    start: float | None = None
    choices: tuple = ()
    flag_default: object = None
    whole: bool = False

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

    def check_value(self, value, source=None, field=None):
        """Check a value of any kind (numbers by range, choices by membership, names and dtypes as
        strings their loaders then resolve, rates as a list); returns the value in its plain form."""
        if self.kind == "number":  # `check` inlined: one call per value (a Scenario checks ~35 of them)
            if not self.ok(value):
                self.check(value, source, field)  # raises the one-line error
            return int(float(value)) if self.integer else value
        field = field or self.name
        if self.kind == "choice":
            if value not in self.choices:
                raise field_error(field, value, f"one of {', '.join(self.choices)}", source)
            return value
        if self.kind == "rates":
            return check_rates(value, field, source)
        if not isinstance(value, str) or not value.strip():
            what = {"dtype": "a storage dtype name", "registered": "a name"}.get(self.kind, "a preset name or a "
                                                                                           "file path")
            raise field_error(field, value, what, source)
        if len(value) > 255:
            raise field_error(field, value[:40] + "...", "a preset or a path of at most 255 characters", source)
        return value

    @property
    def csv_input(self):
        """The row as the measurements CSV checks it: its own range where it has one."""
        return dataclasses.replace(self, **(self.csv_range or {}), integer=self.integer or self.whole)

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


def check_rates(value, field, source=None):
    """A per-position acceptance vector: 1 to `K_MAX` rates in [0, 1], as a tuple of floats."""
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= K_MAX:
        raise field_error(field, value, f"1 to {K_MAX} rates in [0, 1], position 1 first", source)
    return tuple(INPUTS["alpha"].check(v, source, f"{field}[{i}]") for i, v in enumerate(value))


def _i(name, tree, leaves, lo, hi, unit="", column=None, **kw):
    leaves = (leaves,) if isinstance(leaves, str) else tuple(leaves)
    return Input(name, tree, leaves, float(lo), float(hi), unit, column if column is not None else name, **kw)


def _c(name, kind, default, help, group="point", choices=(), **kw):
    """A row for an input that is not a number: a choice, a preset-or-file name, a dtype, a vector."""
    kw.setdefault("scenario", True)
    kw.setdefault("flag", "model")
    return Input(name, "", (), 0.0, 0.0, kind=kind, default=default, help=help, group=group, choices=choices,
                 column=None, axis=False, sensitivity=False, **kw)


_S = dict(scenario=True, flag="model")  # a Scenario field and a model flag of every command
_L = dict(scenario=True, flag="load", group="load")  # a Scenario field and a flag of the serving commands


_ALL = (
    # what runs where: models, drafter, hardware, engine, numerics
    _c("target", "name", REQUIRED, "Target model: preset slug or config.json path.", "system", pair=True, csv="target"),
    _c("hardware", "name", REQUIRED, "Accelerator: preset slug or hardware TOML path.", "system", pair=False,
       csv="hardware"),
    _c("drafter", "registered", "ratio", "How drafts are made (see `specjax presets`).", "system", pair=True,
       csv="drafter"),  # choices: the drafter registry (`inputs.drafters`), which checks the name
    _c("draft", "name", None, "Draft model or EAGLE head: slug or config.json path.", "system", pair=True,
       csv="draft"),
    _i("draft_cost", "op", "draft_cost_ratio", 0, 10, "draft pass / target pass", "draft_cost_ratio", symbol="c",
       help="Draft pass cost / target pass cost (drafter=ratio).", group="system", pair=True, **_S),
    _i("tp", "deploy", "tp", 1, 4096, "attention tensor-parallel GPUs (per attention-DP rank)", "tp_gpus",
       fixed=True, integer=True, default=1, help="Tensor-parallel degree of attention (GPUs per replica: tp x "
       "dp-attention).", group="system", pair=True, csv="tp", **_S),
    _i("ep", "deploy", "ep", 1, 4096, "expert-parallel degree of the MoE layers", "ep_gpus", fixed=True, integer=True,
       sensitivity=False, default=1, help="Expert-parallel degree of the MoE layers (divides the experts and the "
       "GPUs).", group="system", pair=True, csv="ep", **_S),
    _i("dp_attention", "deploy", "dp_attention", 1, 4096, "attention data-parallel ranks", "dp_attention_ranks",
       fixed=True, integer=True, sensitivity=False, symbol="d_a", default=1, help="Attention data-parallel ranks, "
       "each tp GPUs holding 1/dp of the sequences (SGLang/vLLM DP attention).", group="system", pair=True,
       csv="dp_attention", **_S),
    _i("draft_tp", "deploy", "draft_tp", 1, 4096, "the drafter's tensor-parallel degree", "draft_tp_gpus",
       fixed=True, integer=True, sensitivity=False, help="The drafter's own TP degree (vLLM "
       "draft_tensor_parallel_size; default: the target's layout).", group="system", pair=True, csv="draft_tp", **_S),
    _i("expert_imbalance", "deploy", "expert_imbalance", 1, 64, "busiest rank's expert work / mean", fixed=True,
       default=1.0, help="Busiest EP rank's routed-expert work / the mean (>= 1).", group="system", **_S),
    # the operating point
    _i("batch", "op", "batch", 1, 1e8, "sequences", "batch_seqs", fixed=True, sensitivity=False, default=1.0,
       help="Decode batch (sequences).", scenario=True, csv="batch"),
    _i("k", "op", "k", 0, 64, "draft tokens per step", "k_tokens", fixed=True, default=2,
       help="Draft length: tokens proposed per step.", csv="k", csv_range=dict(lo=1.0), whole=True, **_S),
    _i("alpha", "op", "alpha", 0, 1, "per-token acceptance", fixed=True, help="Per-token acceptance rate in [0, 1].",
       csv="acceptance_rate", **_S),
    _i("accepted_length", "op", (), 1, 65, "tokens per step incl. the bonus token", "accepted_length_tokens",
       fixed=True, symbol="tau", sensitivity=False, csv="accepted_length",
       help="Mean accepted length per step incl. bonus token, in [1, k+1].", **_S),
    _c("acceptance_vector", "rates", None, "Conditional acceptance per draft position, a_1,a_2,... (beyond the "
       "last: the last). Replaces --alpha.", pair=True, fixed=True),
    _c("position_rates", "rates", None, "vLLM's per-position acceptance rates r_1,r_2,... (unconditional; "
       "a_i = r_i / r_(i-1)). Replaces --alpha.", pair=True, fixed=True),
    _i("tree_topk", "op", "tree_topk", 1, 64, "draft-tree branching per step (1: a chain)", fixed=True,
       integer=True, sensitivity=False, help="Draft tree: branching per step (SGLang speculative-eagle-topk; --k is "
       "the depth, speculative-num-steps).", pair=True, csv="tree_topk", **_S),
    _i("tree_tokens", "op", "tree_tokens", 2, 4096, "tokens verified per sequence, root included",
       "tree_tokens", fixed=True, integer=True, sensitivity=False, help="Draft tree: tokens verified per sequence, "
       "root included (SGLang speculative-num-draft-tokens).", pair=True, csv="tree_tokens", **_S),
    _i("draft_kv_budget", "op", "draft_kv_budget", 1, 1e9, "tokens of KV the drafter keeps per layer",
       "draft_kv_budget_tokens", fixed=True, sensitivity=False, help="Tokens of KV the drafter keeps and reads per "
       "layer (StreamingLLM / MagicDec; default: all).", pair=True, **_S),
    _i("draft_passes", "op", "draft_passes", 1, 64, "passes of a parallel drafter per step", "draft_passes",
       fixed=True, integer=True, sensitivity=False, help="Passes of a parallel drafter per step, each over B x k "
       "tokens (drafter=parallel: 1 for PARD and P-EAGLE, DFlash's denoising steps; default 1).", pair=True,
       csv="draft_passes", **_S),
    _i("context", "op", "context", 0, 1e8, "tokens in each sequence's KV cache", "context_tokens", fixed=True,
       default=2048.0, help="Tokens in each sequence's KV cache.", csv="context", **_S),
    _c("weight_dtype", "dtype", None, "Weight dtype for all weights (default: from config).", "system", pair=True,
       fixed=True, csv="weight_dtype"),
    _c("expert_dtype", "dtype", None, "Weight dtype for routed experts only.", "system", pair=True, fixed=True,
       csv="expert_dtype"),
    _c("kv_dtype", "dtype", None, "KV-cache dtype (default: weight dtype).", "system", pair=True, fixed=True,
       csv="kv_dtype"),
    _c("compute_dtype", "choice", "bf16", "Compute dtype whose peak FLOP/s applies.", "system",
       choices=("bf16", "fp16", "fp8", "fp4", "int8"), csv="compute_dtype"),
    _c("roofline", "choice", "operator", "operator (per-operator roofline) | pass (one roofline per pass).",
       "system", choices=MODES),
    _i("memory_fraction", "deploy", "memory_fraction", 0, 1, "usable fraction of HBM", fixed=True,
       sensitivity=False, lo_open=True, symbol="u", default=0.9, help="Usable fraction of HBM.", group="system",
       **_S),
    _c("engine", "name", "vllm", "Engine profile: vllm, sglang, trtllm, atom (fitted on published data), an engine "
       "TOML, or roofline (the pure model).", "system", pair=True, csv="engine"),
    _i("expert_locality", "op", "expert_locality", 0, 1, "workload: 0 independent routing, 1 identical",
       fixed=True, default=0.0, help="MoE expert locality of the workload: 0 = sequences route independently, "
       "1 = identically (one prompt copied B times).", csv="expert_locality", **_S),
    # the serving load (docs/model.md §10): inputs of the serving reductions and `specjax serve`; a scenario without
    # input_len is a decode batch, the serving commands default to vllm bench serve's random dataset
    _i("qps", "load", "qps", 0, 1e7, "requests/s", "qps_req_s", fixed=True, sensitivity=False, lo_open=True,
       help="Request rate (requests/s).", scenario=True, csv="qps"),
    _i("concurrency", "load", "concurrency", 1, 1e8, "clients of a closed loop (requests in flight)",
       "concurrency_reqs", fixed=True, sensitivity=False, integer=True,
       help="Closed-loop client concurrency N (vllm bench serve --max-concurrency).", scenario=True,
       csv="concurrency"),
    _i("input_len", "load", "input_len", 1, 1e7, "prompt tokens per request", "input_len_tokens", fixed=True,
       sensitivity=False, flag_default=1024.0, help="Mean prompt tokens per request (L_in).", csv="input_len", **_L),
    _i("output_len", "load", "output_len", 1, 1e7, "output tokens per request", "output_len_tokens", fixed=True,
       sensitivity=False, flag_default=128.0, help="Mean output tokens per request (L_out).", csv="output_len", **_L),
    _i("max_num_seqs", "load", "max_num_seqs", 1, 1e8, "the engine's batch cap (sequences)", fixed=True,
       sensitivity=False, integer=True, help="The engine's batch cap (vLLM --max-num-seqs; default: the engine's "
       "on this GPU).", csv="max_num_seqs", **_L),
    _i("chunk_tokens", "load", "chunk_tokens", 1, 1e8, "prompt tokens prefilled per iteration", fixed=True,
       sensitivity=False, integer=True, help="Prompt tokens prefilled per iteration (vLLM --max-num-batched-tokens; "
       "default: the engine's on this GPU).", **_L),
    _i("acceptance_spread", "load", "acceptance_spread", 0, 5, "std of a request's log-odds of acceptance",
       axis=False, sensitivity=False, scenario=True, group="load",
       help="Spread of acceptance over requests: the standard deviation of each request's log-odds of acceptance "
       "around the scenario's (0: every request alike; docs/model.md §10.1). serve reports TPOT percentiles."),
    # the hardware and its engine terms (hardware TOML and engine profile keys, sweep axes)
    # physical ranges of real accelerators (a value outside is a unit mistake: 3.2 meant 3.2e12 bytes/s)
    _i("flops_per_s", "hw", "flops_per_s", 1e10, 1e18, "FLOP/s", typical=1e15, group="system"),
    _i("hbm_bytes_per_s", "hw", "hbm_bytes_per_s", 1e9, 1e15, "bytes/s", profile=True, typical=3e12,
       group="system"),
    _i("hbm_bytes", "hw", "hbm_bytes", 1e8, 1e13, "bytes", sensitivity=False, profile=True, typical=8e10,
       group="system"),
    _i("link_bytes_per_s", "hw", "link_bytes_per_s", 1e8, 1e14, "bytes/s, one direction", profile=True,
       typical=4e11, group="system"),
    _i("link_latency_s", "hw", "link_latency_s", 0, 1, "seconds per all-reduce", profile=True, group="system"),
    _i("gpus_per_node", "hw", "gpus_per_node", 1, 1e5, "GPUs one NVLink-class domain joins", profile=True,
       integer=True, sensitivity=False, group="system"),
    _i("internode_bytes_per_s", "hw", "internode_bytes_per_s", 1e8, 1e14, "bytes/s, one direction, per GPU",
       profile=True, typical=5e10, group="system"),
    _i("internode_latency_s", "hw", "internode_latency_s", 0, 1, "seconds per inter-node collective",
       profile=True, group="system"),
    _i("flops_efficiency", "hw", "flops_efficiency", 0, 1, "achieved / peak FLOP/s", profile=True,
       fit=(0.3, 1.0), lo_open=True, engine="efficiency", prior=0.7, start=0.7, group="system"),
    _i("hbm_efficiency", "hw", "hbm_efficiency", 0, 1, "achieved / peak bytes/s", profile=True, fit=(0.7, 1.0),
       lo_open=True, engine="efficiency", prior=0.85, start=0.85, group="system"),
    _i("fixed_overhead_s", "hw", "fixed_overhead_s", 0, 1, "seconds per forward pass", profile=True,
       fit=(0.0, 5e-3), engine="overhead", prior=0.0, start=3e-4, group="system"),
    _i("layer_overhead_s", "hw", "layer_overhead_s", 0, 1e-2, "seconds per layer per pass", profile=True,
       fit=(0.0, 3e-4), engine="overhead", prior=0.0, start=1e-5, group="system"),
    _i("kernel_overhead_s", "hw", "kernel_overhead_s", 0, 1e-3, "seconds per kernel per pass", profile=True,
       fit=(0.0, 2e-5), engine="overhead", prior=0.0, start=2e-6, group="system"),
    _i("draft_overhead_s", "hw", "draft_overhead_s", 0, 1, "seconds per draft pass", profile=True,
       fit=(0.0, 3e-3), engine="overhead", prior=0.0, start=2e-4, group="system"),
    _i("step_overhead_s", "hw", "step_overhead_s", 0, 1, "seconds per speculative step", profile=True,
       fit=(0.0, 5e-3), engine="overhead", prior=0.0, start=5e-4, group="system"),
    _i("non_overlap", "hw", "non_overlap", 0, 1, "0 roofline, 1 sum of math and memory", profile=True,
       fit=(0.0, 1.0), engine="efficiency", prior=0.0, start=0.2, group="system"),
    _i("prefill_efficiency", "hw", "prefill_efficiency", 0, 1, "achieved / peak FLOP/s of prefill (eta_P)",
       profile=True, fit=(0.2, 1.0), lo_open=True, engine="efficiency", prior=1.0, start=0.6, group="system"),
    # fitting bounds: a layer's norms, residuals, rotary, quantisation and FFN intermediates move tens of d-wide
    # vectors per token (100 at most); an MoE layer's grouped GEMMs at few tokens per expert cost far more than
    # their activations, which the expert term absorbs (an effective value: hundreds are measured)
    _i("activation_traffic", "hw", "activation_traffic", 0, 1e5, "d_model-wide 16-bit vectors per token per layer",
       profile=True, fit=(0.0, 100.0), engine="per_token", prior=0.0, start=20.0, group="system"),
    _i("expert_traffic", "hw", "expert_traffic", 0, 1e5, "d_model-wide 16-bit vectors per token per routed expert "
       "per MoE layer", profile=True, fit=(0.0, 2000.0), engine="per_token", prior=0.0, start=10.0, group="system"),
    # the target's shape (sweep axes and sensitivities; a model's own numbers come from its config)
    _i("n_experts", "target", "n_experts", 1, 1e6, "routed experts E", group="system"),
    _i("top_k", "target", "top_k", 1, 1e6, "experts per token r", group="system"),
    _i("expert_granularity", "target", (), 1e-6, 1e6, "E and r times g, expert size / g", sensitivity=False,
       group="system"),
    _i("window", "target", "window", 1, 1e9, "sliding-window tokens", "window_tokens", sensitivity=False,
       group="system"),
    _i("expert_size", "target", "p_expert", 0, 1e15, "params per expert", axis=False, group="system"),
    _i("target_size", "target", ("p_dense", "p_head", "p_expert"), 0, 1e15, "scale of all weights", axis=False,
       group="system"),
    _i("kv_bytes", "target", ("b_kv", "draft.b_kv"), 0, 8, "scale of the KV bytes of target and drafter",
       axis=False, group="system"),
    _i("draft_size", "draft", ("p_dense", "p_head*head_resident", "p_expert"), 0, 1e15,
       "scale of the drafter's own weights", axis=False, group="system"),
)

INPUTS = {i.name: i for i in _ALL}
K_MAX = int(INPUTS["k"].hi)


def _views():
    """The derived name -> row tables (recomputed by `register`)."""
    g = globals()
    g.update(AXES={n: i for n, i in INPUTS.items() if i.axis}, FIXED={n: i for n, i in INPUTS.items() if i.fixed},
             SENSITIVITY={n: i for n, i in INPUTS.items() if i.sensitivity},
             PROFILE={n: i for n, i in INPUTS.items() if i.profile}, FIT={n: i for n, i in INPUTS.items() if i.fit},
             ENGINE={n: i for n, i in INPUTS.items() if i.engine},
             LOAD={n: i for n, i in INPUTS.items() if i.tree == "load"},
             SCENARIO={n: i for n, i in INPUTS.items() if i.scenario},
             PAIR={n: i for n, i in INPUTS.items() if i.pair},
             CSV={i.csv: i for i in INPUTS.values() if i.csv},
             ECHO={n: i for n, i in INPUTS.items() if i.scenario and i.echo})
    g["OVERHEADS"] = {n: i for n, i in g["ENGINE"].items() if i.engine == "overhead"}


def register(row):
    """Add an input row (a plug-in or a test); every derived table follows. Returns the row."""
    if row.name in INPUTS:
        raise ValueError(f"input {row.name!r} exists")
    if row.kind not in KINDS or row.group not in GROUPS or (row.tree and row.tree not in TREES):
        raise ValueError(f"input {row.name!r}: kind, group or tree not one of {KINDS}, {GROUPS}, {TREES}")
    INPUTS[row.name] = row
    _views()
    return row


def unregister(name):
    """Remove a row added by `register`."""
    INPUTS.pop(name)
    _views()


_views()
EXPERT_HOLD = ("expert_size", "footprint")


def column(name):
    """Result-grid column of an input (units in the name)."""
    return INPUTS[name].column


def check(name, value, source=None, field=None):
    """Range-check `value` for input `name` (see `Input.check`)."""
    return INPUTS[name].check(value, source, field)
