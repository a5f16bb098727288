"""Published speculative-decoding measurements (CSV), validated row by row into model inputs.

Schema: `data/measured/README.md` (series, target, drafter, draft, hardware, tp, batch, k,
acceptance_rate, accepted_length, context, weight_dtype, measured_speedup, metric, approximate,
source_url). Optional columns: `engine` (the engine profile of the row: vllm, sglang, trtllm, ...),
`expert_locality` (a workload property, 0..1), `dataset` (rows of one target, drafter, draft and
dataset share one acceptance), `t_base_s` and `t_sd_step_s` (measured step times, seconds), `ep`,
`dp_attention` and `draft_tp` (the layout), `tree_depth`, `tree_topk` and `tree_tokens` (a draft tree),
`kv_dtype` (the KV-cache dtype; empty: the engine's default), `expert_dtype` (the routed experts' weight dtype
where only they are quantised, e.g. gpt-oss's MXFP4 experts beside BF16 attention; empty: weight_dtype). A file
with `value_s` and no `drafter` column holds plain step times under load instead (`inputs.steps`). Rows at a
request rate (docs/model.md §10) or a closed-loop client concurrency (docs/model.md §11) give `qps` or
`concurrency`, `input_len`, `output_len` and `measured_ratio` (the ratio of the metric `metric` names at equal load:
`METRICS`) in place of `batch`, `context` and `measured_speedup` (a file of such rows may omit those three columns),
and optionally `max_num_seqs`: exactly one of batch, qps and concurrency per row. The columns of model inputs and
their ranges are the catalogue's (`catalogue.CSV`).

A malformed value (a number that is not a number, an alpha above 1) is an error naming the file, the
line, the column, the value and what is allowed. A row the model cannot represent (an unknown slug or
drafter, an unsupported parallelism, a tensor-parallel degree the model does not divide by) is kept
with its reason in `unsupported` and skipped by validation and calibration: it never aborts the file.
`stack` turns the supported rows into one batch of pytrees (leading axis = row).
"""

import dataclasses
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl

from .. import catalogue
from . import cells, drafters, engines, scheduler, steps
from . import hardware as _hw
from . import models as _models
from .cells import check_buildable
from .cells import err as _err, known as _known, model_input as _input, number as _number
from .dtypes import BYTES_PER_ELEMENT, canonical
from ..errors import SpecError, read_text
from .scenario import Scenario, tree_tau_error
from ..cost.trees import Decode, Load

# The columns of the model's inputs are the catalogue's (`catalogue.CSV`: column -> input row, with its range);
# the rest describe the measurement.
COLUMNS = ("series", "target", "drafter", "draft", "hardware", "tp", "batch", "k", "acceptance_rate",
           "accepted_length", "context", "weight_dtype", "measured_speedup", "metric", "approximate", "source_url")
APPROXIMATE = ("yes", "no", "1", "0", "true", "false", "")  # the `approximate` words (ingest writes 0)
BATCH_ONLY = ("batch", "context", "measured_speedup")  # a file of rows at load may leave these out
AT_LOAD = ("input_len", "output_len", "measured_ratio")  # a row at a request rate or a concurrency: with its load
LOAD_COLUMNS = ("qps", "concurrency")  # that load (docs/model.md §10 and §11)
WHAT = {"qps": "a row per request rate", "concurrency": "a row at a closed-loop concurrency"}
MEASUREMENT = ("t_base_s", "t_sd_step_s", "dataset", "tree_depth", "measured_ratio")  # optional, not model inputs


def optional_columns():
    """Columns a file may leave out: every catalogue input column not in `COLUMNS`, and the measurement's."""
    return tuple(c for c in catalogue.CSV if c not in COLUMNS) + MEASUREMENT


# The metrics a row may name, per load kind (`cells.LOADS`). At a closed-loop concurrency N the row's
# measured_ratio is the ratio at equal N of the metric its source printed, and the table names the
# `search.concurrency.ClosedSide` field it is the ratio baseline / speculative of:
# - throughput: output (or request) throughput speculative / baseline = E2E baseline / speculative, as
#   N = X E2E on both sides (`ClosedLoop.ratio_e2e`);
# - tpot: (E2E - TTFT) / (L_out - 1) as benchmarks compute it (`ClosedLoop.speedup_tpot`);
# - itl: vLLM bench serve's ITL, the gap between streamed chunks: with speculation a chunk carries the
#   tokens of one verification, so the ratio is of iterations, base / speculative (below 1 where the
#   verify pass costs more than a decode pass); a per-token ITL (E2E - TTFT over tokens) is tpot's;
# - ttft and e2e_request_latency: the ratio of those latencies (`ratio_ttft`, `ratio_e2e`).
METRICS = {"batch": ("throughput", "latency"), "qps": ("e2e_request_latency", "tpot"),
           "concurrency": {"throughput": "e2e_s", "tpot": "tpot_s", "e2e_request_latency": "e2e_s",
                           "itl": "iteration_s", "ttft": "ttft_s"}}
# Ratios that do not rise with acceptance (an iteration with speculation is longer, the more so the
# more tokens it carries; a prompt's TTFT does not depend on it at one client): they cannot anchor a fitted alpha
NO_ALPHA = ("itl", "ttft")
LAYOUT = ("ep", "dp_attention", "draft_tp")  # optional layout columns (docs/model.md §2.4); tp is required
DEFAULT_ENGINE = engines.DEFAULT  # rows with an empty engine column
MAX_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row(cells.Measured):
    """One measured speedup (or latency / throughput ratio at a request rate or a concurrency) and the
    inputs it was measured at."""

    drafter: str
    draft: str | None
    batch: float
    k: int
    alpha: float | None
    tau: float | None
    context: float
    speedup: float
    metric: str
    t_base_s: float | None = None
    t_sd_step_s: float | None = None
    expert_locality: float = 0.0
    draft_tp: int | None = None
    draft_passes: int | None = None
    tree_topk: int | None = None
    tree_tokens: int | None = None
    input_len: float | None = None
    output_len: float | None = None
    max_num_seqs: int | None = None

    is_step = False  # a speedup row (plain step-time rows: `inputs.steps.StepRow`)

    @property
    def is_rate(self):
        """A row given per request rate (qps, lengths, measured_ratio) rather than per batch."""
        return self.load_kind == "qps"

    @property
    def acceptance_group(self):
        """Rows that share one acceptance (docs/model.md §13): same target, drafter, draft, dataset and load kind
        (rows of each kind are predicted apart); without a dataset column, the series."""
        key = (self.target, self.drafter, self.draft or "", self.dataset) if self.dataset else (self.series,)
        return key + ((self.load_kind,) if self.load_kind != "batch" else ())

    @property
    def layout(self):
        """(tp, ep, dp_attention, draft_tp, tree shape): part of every build cache key (k only for a tree,
        whose checks depend on its depth)."""
        tree = (self.tree_topk, self.tree_tokens, self.k) if self.tree_topk is not None else None
        return (self.tp, self.ep, self.dp_attention, self.draft_tp, tree)

    @property
    def build_key(self):
        """What `Scenario.check` of the row depends on (`cells.check_buildable` checks each once)."""
        return (self.target, self.drafter, self.draft, self.hardware, self.layout, self.weight_dtype,
                self.expert_dtype, self.kv_dtype, self.compute_dtype)

    def scenario(self, hardware=None, roofline="operator"):
        """The row's model inputs (its catalogue columns) as a `Scenario` on the hardware file alone: the
        engine profile is applied by `stack`, the acceptance set per row (a placeholder alpha here)."""
        given = {r.name: getattr(self, r.name) for r in catalogue.CSV.values()
                 if r.name not in ("alpha", "accepted_length", "engine", "concurrency")}
        return Scenario(**{**given, "draft": self.draft or None, "hardware": hardware or self.hardware},
                        alpha=0.5, roofline=roofline, engine=engines.PURE)


def _at_load(p, line, r):
    """The load fields of a row at a request rate or a closed-loop concurrency ({} for a row per batch):
    qps or concurrency, lengths, measured_ratio and an optional max_num_seqs. A row with a qps or a
    concurrency needs the rest and must leave the batch columns empty; exactly one load per row."""
    cell = lambda c: (r.get(c) or "").strip()  # noqa: E731
    loads = [c for c in LOAD_COLUMNS if cell(c)]
    if not loads:
        if any(cell(c) for c in AT_LOAD):
            raise _err(p, line, "qps", "", f"a value, or a concurrency: a row with {', '.join(AT_LOAD)} is at a "
                       "request rate or a closed-loop concurrency")
        return {}
    kind, what = loads[0], WHAT[loads[0]]
    if len(loads) > 1:
        raise _err(p, line, "concurrency", r["concurrency"], f"empty in {what} (qps = {r['qps']}): exactly one "
                   "of batch, qps and concurrency per row")
    for c in BATCH_ONLY:
        if cell(c):
            raise _err(p, line, c, r[c], f"empty in {what} ({kind} = {r[kind]}): exactly one of batch, qps and "
                       "concurrency per row" if c == "batch" else f"empty in {what} ({kind} = {r[kind]})")
    need = (kind,) + AT_LOAD
    if not all(cell(c) for c in need):
        missing = next(c for c in need if not cell(c))
        raise _err(p, line, missing, r.get(missing) or "", f"a value: {what} needs {', '.join(need)}")
    out = {c: _input(p, line, c, r[c], optional=False) for c in (kind, "input_len", "output_len")}
    out["measured_ratio"] = _number(p, line, "measured_ratio", r["measured_ratio"], "a number > 0 (the ratio "
                                    "of the metric at equal load: baseline / speculative latency, speculative / "
                                    "baseline throughput)", lambda v: 0 < v < 100)
    out["max_num_seqs"] = _input(p, line, "max_num_seqs", r.get("max_num_seqs"))
    return out


def _unsupported(r, model_slugs, hw_slugs):
    """Why the model cannot represent row `r` (a dict of strings), or None."""
    for col, known in (("target", model_slugs), ("hardware", hw_slugs)):
        if not _known(r[col], known):
            return f"column {col}: {r[col] or ''!r}; expected a preset slug ({', '.join(sorted(known)[:4])}, ...) " \
                   "or a path"
    if r["drafter"] not in drafters.names(measurable_only=True):
        return f"column drafter: {r['drafter']!r}; expected one of {', '.join(drafters.names(measurable_only=True))}"
    if drafters.get(r["drafter"]).needs_draft and not _known(r["draft"], model_slugs):
        return f"column draft: {r['draft'] or ''!r}; expected a draft model or EAGLE head preset for this drafter"
    return None


def tau_ok(tau, k=None):
    """An accepted length (tokens per step, the bonus token included) that a chain of k drafts can give:
    1 <= tau <= k + 1 (the catalogue's range without a k)."""
    return math.isfinite(tau) and 1.0 <= tau <= (k + 1 if k is not None else catalogue.INPUTS["accepted_length"].hi)


def tau_range(k=None):
    return f"in [1, k+1 = {k + 1}]" if k is not None else "in [1, 65]"


def check_acceptance(p, line, k, tau, rates=(), tol=1e-6):
    """The checks every acceptance summary passes, measured row or ingested engine output: k a whole draft
    length in the catalogue's range, 1 <= tau <= k + 1, per-position rates (vLLM's unconditional r_i) finite
    in [0, 1], non-increasing, one per draft position, summing to tau - 1 within `tol` (the rounding of
    the numbers they came from). Raises a `SpecError` naming the file, the line, the column and the value."""
    if k is not None:
        _number(p, line, "k", str(k), catalogue.CSV["k"].csv_input.range_text(), catalogue.CSV["k"].csv_input.ok,
                integer=True)
    if not tau_ok(tau, k):
        raise _err(p, line, "accepted_length", f"{tau:g}", tau_range(k))
    if not rates:
        return
    text = ",".join(f"{v:g}" for v in rates)
    if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in rates):
        raise _err(p, line, "position_rates", text, "rates in [0, 1] (accepted at position i / drafts)")
    if any(b > a for a, b in zip(rates, rates[1:])):
        raise _err(p, line, "position_rates", text, "non-increasing rates (position i is accepted only after i-1)")
    if k is not None and len(rates) != k:
        raise _err(p, line, "position_rates", text, f"k = {k} rates, one per draft position")
    if abs(sum(rates) - (tau - 1.0)) > tol:
        raise _err(p, line, "position_rates", text, f"rates summing to accepted_length - 1 = {tau - 1:.4g} (they sum "
                   f"to {sum(rates):.4g}: not the counts of one run)")


def row_from_cells(p, line, r, model_slugs, hw_slugs):
    """One measured row from its cells (a dict of strings, as the CSV reads), checked: the one path of every
    measured row, read by `load` and written by `specjax ingest`. Raises a `SpecError` naming the file, the
    line, the column, the value and what is allowed."""
    if not r["series"]:
        raise _err(p, line, "series", "", "a non-empty series id")
    for col in ("target", "hardware", "drafter"):
        if not (r[col] or "").strip():
            raise _err(p, line, col, "", f"a {col} (preset slug or path)" if col != "drafter" else
                       f"one of {', '.join(drafters.names(measurable_only=True))}")
    tp = _input(p, line, "tp", r["tp"], optional=False)
    rate = _at_load(p, line, r)
    k = _input(p, line, "k", r["k"], optional=False)
    alpha = _input(p, line, "acceptance_rate", r["acceptance_rate"])
    tau = _number(p, line, "accepted_length", r["accepted_length"], "empty or " + tau_range(k),
                  lambda v: tau_ok(v, k), optional=True)
    if rate:
        batch, ctx, speed = 1.0, rate["input_len"] + 0.5 * rate["output_len"], rate.pop("measured_ratio")
    else:
        batch = _input(p, line, "batch", r.get("batch"), optional=False)
        ctx = _input(p, line, "context", r.get("context"), optional=False)
        speed = _number(p, line, "measured_speedup", r.get("measured_speedup"),
                        "a number 0 < measured_speedup < 100 (SD / no-SD)", lambda v: 0 < v < 100)
    kind = next((c for c in LOAD_COLUMNS if c in rate), "batch")
    if r["metric"] not in METRICS[kind]:
        raise _err(p, line, "metric", r["metric"], " or ".join(METRICS[kind]) + (f" ({WHAT[kind]})" if rate
                                                                                 else ""))
    if (r.get("approximate") or "").strip().lower() not in APPROXIMATE:  # a word it does not know was dropped
        raise _err(p, line, "approximate", r["approximate"], "yes or no (1 or 0; empty: no)")
    if r["weight_dtype"] not in BYTES_PER_ELEMENT:
        raise _err(p, line, "weight_dtype", r["weight_dtype"], f"one of {', '.join(BYTES_PER_ELEMENT)}")
    times = {c: _number(p, line, c, r.get(c), "empty or seconds > 0", lambda v: v > 0, optional=True)
             for c in ("t_base_s", "t_sd_step_s")}
    layout = {c: _input(p, line, c, r.get(c)) for c in LAYOUT}
    layout = {c: v for c, v in layout.items() if v is not None}
    tree = {c: _input(p, line, c, r.get(c)) for c in ("tree_topk", "tree_tokens")}
    tree["tree_depth"] = _number(p, line, "tree_depth", r.get("tree_depth"), "empty or the tree's depth k",
                                 lambda v: 1 <= v <= 64, integer=True, optional=True)
    if (tree["tree_topk"] is None) != (tree["tree_tokens"] is None):
        raise _err(p, line, "tree_tokens" if tree["tree_tokens"] is None else "tree_topk", "",
                   "tree_topk and tree_tokens together (a draft tree) or neither (a chain)")
    if tree["tree_depth"] is not None and tree["tree_depth"] != k:
        raise _err(p, line, "tree_depth", r.get("tree_depth"), f"k = {k} (the tree's depth is its k)")
    layout.update({c: tree[c] for c in ("tree_topk", "tree_tokens") if tree[c] is not None})
    passes = _input(p, line, "draft_passes", r.get("draft_passes"))
    kind = drafters.REGISTRY.get(r["drafter"].strip())
    if passes is not None and kind is not None and not kind.parallel:
        raise _err(p, line, "draft_passes", r.get("draft_passes"), "empty for a chain drafter (draft_passes "
                   "counts the passes of drafter = parallel)")
    loc = _input(p, line, "expert_locality", r.get("expert_locality"))
    engine = (r.get("engine") or "").strip()
    if engine and not engine.replace("-", "").replace("_", "").isalnum():
        raise _err(p, line, "engine", engine, "an engine name (letters, digits, - and _)")
    return Row(line=line, series=r["series"], target=r["target"], drafter=r["drafter"],
               draft=r["draft"] or None, hardware=r["hardware"], tp=tp, batch=batch, k=k, alpha=alpha,
               tau=tau, context=ctx, weight_dtype=canonical(r["weight_dtype"]), speedup=speed,
               metric=r["metric"], source_url=r["source_url"] or "", engine=engine,
               expert_locality=loc or 0.0, draft_passes=passes, dataset=(r.get("dataset") or "").strip(),
               kv_dtype=cells.dtype(p, line, "kv_dtype", r.get("kv_dtype")),
               expert_dtype=cells.dtype(p, line, "expert_dtype", r.get("expert_dtype")),
               compute_dtype=cells.compute_dtype(p, line, r.get("compute_dtype")),
               unsupported=_unsupported(r, model_slugs, hw_slugs),
               **times, **layout, **rate)


def _no_duplicate_columns(text, p):
    """A header naming a column twice is refused by name (polars renames the second `series_duplicated_0`,
    which then reads as an unknown column nobody wrote)."""
    import csv as _csv

    header = next(_csv.reader([text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")]), [])
    seen = {}
    for i, name in enumerate(header, 1):
        if not name.strip():
            raise SpecError(f"{p}: column {i} of the header has no name (a trailing comma?); expected a column name")
        if name in seen:
            raise SpecError(f"{p}: column {name!r} given twice (columns {seen[name]} and {i}); expected each once")
        seen[name] = i


def load(path):
    """Read and validate a measurements CSV; returns a list of `Row` (unsupported rows included, with
    their reason). Raises `SpecError` for a malformed file or value, or when no row is supported."""
    p = pathlib.Path(path)
    text = read_text(p, "measurements file", MAX_BYTES)
    _no_duplicate_columns(text, p)
    try:
        df = pl.read_csv(text.encode(), infer_schema=False, truncate_ragged_lines=False)
    except Exception as e:  # polars raises several types for malformed CSV
        raise SpecError(f"malformed CSV {str(p)!r}: {str(e).splitlines()[0]}") from None
    if steps.is_step_file(df.columns):  # plain step times under load (`inputs.steps`)
        return steps.rows(df, p)
    known = COLUMNS + optional_columns()
    unknown = [c for c in df.columns if c not in known]
    if unknown:
        raise SpecError(f"{p}: unknown column {unknown[0]!r}; expected {', '.join(known)}")
    load_file = all(c in df.columns for c in AT_LOAD) and any(c in df.columns for c in LOAD_COLUMNS)
    missing = [c for c in COLUMNS if c not in df.columns and not (load_file and c in BATCH_ONLY)]
    if missing:
        raise SpecError(f"{p}: missing column {missing[0]!r}; expected columns {', '.join(COLUMNS)} (or, for rows "
                        f"at a request rate or a concurrency, qps or concurrency and {', '.join(AT_LOAD)} in place "
                        f"of {', '.join(BATCH_ONLY)})")
    partial = [c for c in ("qps",) + AT_LOAD if c in df.columns] if not load_file else []
    if partial:  # (a `concurrency` column alone is checked per row: an empty one is allowed in a batch file)
        absent = [c for c in AT_LOAD if c not in df.columns] or ["qps or concurrency"]
        raise SpecError(f"{p}: column {partial[0]!r} without {', '.join(absent)}; expected qps or concurrency "
                        f"and all of {', '.join(AT_LOAD)} for rows at a request rate or a concurrency")
    if df.height == 0:
        raise SpecError(f"{p}: no data rows")
    model_slugs, hw_slugs = set(_models.preset_slugs()), set(_hw.preset_slugs())
    rows = [row_from_cells(p, i + 2, r, model_slugs, hw_slugs) for i, r in enumerate(df.iter_rows(named=True))]
    rows = _tree_tau_fits(check_buildable(rows))
    if all(r.unsupported for r in rows):
        raise SpecError(f"{p}: no row can be evaluated; line {rows[0].line}, {rows[0].unsupported}")
    return rows


def _tree_tau_fits(rows):
    """Mark a draft-tree row whose measured accepted length the tree estimate cannot reproduce unsupported
    (`scenario.tree_tau_error`: above its tau at alpha = 1): used as given or not at all, never clipped."""
    out = []
    for r in rows:
        if r.unsupported is None and r.tau is not None and r.tree_topk is not None:
            msg = tree_tau_error(r.tau, r.tree_topk, r.tree_tokens, r.k)
            if msg:
                r = dataclasses.replace(r, unsupported=f"column accepted_length: {r.tau:g}; expected {msg}")
        out.append(r)
    return out


def engine_profile(name, profiles=None):
    """The `EngineProfile` called `name`: from `profiles` (e.g. fitted ones; its key "*" serves every
    engine it lacks) or the presets. An engine with no profile of its own (an engine name the presets
    do not know, e.g. `hf` or `t5x`) is predicted with the `generic` preset (efficiencies pooled over
    every engine, no overheads: `engines.transferable`): achieved fractions of the silicon transfer
    between engines better than the pure roofline's 1, an engine's overheads do not transfer at all."""
    if profiles and name in profiles:
        return profiles[name]
    if profiles and "*" in profiles:  # a pooled profile serves engines without their own
        return profiles["*"]
    if name == engines.PURE or name in engines.preset_slugs():
        return engines.load(name)
    return engines.load(engines.GENERIC)


def stack(rows, engine=None, profiles=None, dtype=jnp.float32, roofline="operator"):
    """Pytrees for supported rows, stacked on a leading axis: (Hardware, Deployment, target, draft, Decode).

    `engine` (a name, path or `EngineProfile`) is applied to every row; None applies each row's own
    engine (`Row.engine_name`), looked up in `profiles` (name -> `EngineProfile`) first, then the presets.
    Rows sharing a configuration share one build; the stacked trees are gathered from the distinct
    configurations with one index array, and the operating points are built column-wise, so a file of
    100,000 rows costs a few arrays, not 100,000 pytrees.
    """
    fixed = engines.load(engine) if isinstance(engine, str) else engine
    configs, index, limits = {}, [], []
    for r in rows:
        prof = fixed or engine_profile(r.engine_name, profiles)
        key = (*r.build_key, id(prof))
        if key not in configs:
            sc = r.scenario(roofline=roofline)
            try:
                hw, deploy, tgt, dr, _ = sc.build(dtype)
            except SpecError as e:
                raise SpecError(f"line {r.line}: {e}") from None
            hw_prof = prof.apply(sc.check()[0])  # the hardware file as read by the build (cached)
            configs[key] = (len(configs), (hw_prof.resolve(sc.compute_dtype, dtype, roofline), deploy, tgt, dr),
                            scheduler.engine_limits(prof, engines.load(DEFAULT_ENGINE), hw_prof, speculative=True))
        index.append(configs[key][0])
        limits.append(configs[key][2])
    uniq = [built for _, built, _ in configs.values()]
    if any(d.parallel for _, d, _, _ in uniq):  # one tree structure for every row: the general layout kernels
        uniq = [(h, d.replace(parallel=True), t, dr) for h, d, t, dr in uniq]
    idx = np.asarray(index, dtype=np.int64)
    trees = jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])[idx]), *uniq)
    return (*trees, _decode(rows, dtype, limits))


def _decode(rows, dtype, limits):
    """The rows' operating points, one array per field. Where any row is a draft tree every row carries
    tree leaves (a chain as topk 1, k + 1 tokens), so that chain and tree rows stack together. A row per
    request rate or a concurrency without `max_num_seqs` takes its engine's scheduler defaults (`limits`,
    per row); a concurrency row's `Load.qps` is a placeholder (the closed loop reads `Load.concurrency`)."""
    cols = dict(batch=[r.batch for r in rows], k=[r.k for r in rows],
                alpha=[r.alpha if r.alpha is not None else 0.5 for r in rows], context=[r.context for r in rows],
                draft_cost_ratio=[0.0] * len(rows), expert_locality=[r.expert_locality for r in rows])
    if any(r.tree_topk is not None for r in rows):
        cols.update(tree_topk=[r.tree_topk or 1 for r in rows], tree_tokens=[r.tree_tokens or r.k + 1 for r in rows])
    parallel = [getattr(drafters.REGISTRY.get(r.drafter), "parallel", False) for r in rows]
    if any(parallel):  # every row carries the leaf: 0 for a chain row (docs/model.md §5.2; `Decode.draft_passes`)
        cols.update(draft_passes=[(r.draft_passes or 1) if par else 0 for r, par in zip(rows, parallel)])
    arr = lambda v: jnp.asarray(np.asarray(v, dtype=np.dtype(dtype)))  # noqa: E731
    load = None
    kinds = {r.load_kind for r in rows}
    if len(kinds) > 1:  # rows of each load kind are stacked on their own (`validate`)
        raise ValueError(f"stack rows of one load kind at a time (batch, qps, concurrency), not {sorted(kinds)}")
    if kinds != {"batch"}:
        load = Load(qps=arr([r.qps or 1.0 for r in rows]), input_len=arr([r.input_len for r in rows]),
                    output_len=arr([r.output_len for r in rows]),
                    max_num_seqs=arr([r.max_num_seqs or m["max_num_seqs"] for r, m in zip(rows, limits)]),
                    chunk_tokens=arr([m["chunk_tokens"] for m in limits]),
                    concurrency=arr([r.concurrency or Load.concurrency for r in rows]),
                    plain_max_num_seqs=arr([m.get("plain_max_num_seqs", np.nan) if r.max_num_seqs is None else np.nan
                                            for r, m in zip(rows, limits)]),
                    acceptance_spread=arr([0.0] * len(rows)))  # a measured row's mean: no percentile is scored
    return Decode(**{k: arr(v) for k, v in cols.items()}, load=load)


def series_index(rows):
    """Integer series id per row, and the list of series names (first-seen order)."""
    names = list(dict.fromkeys(r.series for r in rows))
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[r.series] for r in rows]), names
