"""Plain-decoding step times (no speculation) under load, validated row by row: the schema of
`data/measured/serving_steps.csv` (`data/measured/README.md`, "serving_steps.csv").

Columns: series, target, hardware, engine, engine_version, tp, ep, dp_attention, weight_dtype,
kv_dtype, concurrency, qps, input_len, output_len, dataset, metric, value_s, t_base_s, approximate,
source_url, note; optionally `batch` (a fixed decode batch, offline). Each row carries exactly one load:
a closed-loop `concurrency`, an open-loop `qps` or a decode `batch` (docs/model.md §13). `metric` (`METRICS`)
says what `value_s` is. The model-input columns are checked against their catalogue rows (`catalogue.CSV`)
as in `inputs.measured`; a malformed value is an error naming the file, line, column, value and what is
allowed. A row the model cannot represent (an unknown slug, a layout it does not divide by) is kept with
its reason in `unsupported` and skipped, never aborting the file.
"""

import dataclasses

from ..errors import SpecError
from . import cells, engines
from .cells import check_buildable
from . import hardware as _hw
from . import models as _models
from .dtypes import BYTES_PER_ELEMENT, canonical

# What `value_s` is, per metric (seconds; all per output token except e2e_request_latency and decode_step)
METRICS = {
    "inv_tput": "concurrency / output throughput of the run (seconds per output token per client)",
    "tpot": "mean over requests of (E2E - TTFT) / (output tokens - 1)",
    "itl": "mean gap between consecutive output tokens of a request",
    "itl_p50": "LLMPerf's inter-token latency: median over requests of E2E (TTFT included) / output tokens",
    "e2e_request_latency": "mean request latency, first byte sent to last token (seconds per request)",
    "decode_step": "one pure decode step (no prefill in it) at the row's batch",
}
REQUIRED = ("series", "target", "hardware", "tp", "weight_dtype", "input_len", "output_len", "metric", "value_s",
            "source_url")
OPTIONAL = ("engine", "engine_version", "ep", "dp_attention", "kv_dtype", "expert_dtype", "compute_dtype",
            "concurrency", "qps", "batch", "dataset", "t_base_s", "approximate", "note")
LOADS = cells.LOADS  # exactly one per row


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepRow(cells.Measured):
    """One measured plain-decoding time (seconds) and the load it was measured under."""

    input_len: float
    output_len: float
    metric: str
    value_s: float
    batch: float | None = None
    approximate: bool = False

    is_step = True  # a plain step-time row (rows of `inputs.measured` are speedups)

    @property
    def layout(self):
        return (self.tp, self.ep, self.dp_attention)

    @property
    def build_key(self):
        """What `Scenario.check` of the row depends on (`cells.check_buildable` checks each once)."""
        return (self.target, self.hardware, self.layout, self.weight_dtype, self.expert_dtype, self.kv_dtype,
                self.compute_dtype)

    def scenario(self, roofline="operator"):
        """The row as a `Scenario` on the hardware file alone (the engine profile is applied by the
        caller): a plain model with a placeholder drafter that costs nothing (ngram; the baseline side
        is what is scored) and the row's lengths as its load."""
        from .scenario import Scenario

        return Scenario(target=self.target, hardware=self.hardware, tp=self.tp, ep=self.ep,
                        dp_attention=self.dp_attention, weight_dtype=self.weight_dtype, expert_dtype=self.expert_dtype,
                        kv_dtype=self.kv_dtype, compute_dtype=self.compute_dtype, drafter="ngram", k=1, alpha=0.5,
                        input_len=self.input_len, output_len=self.output_len, engine=engines.PURE, roofline=roofline)


def is_step_file(columns):
    """True for a file of plain step times (it has `value_s` and no `drafter`)."""
    return "value_s" in columns and "drafter" not in columns


def rows(df, p):
    """Validate the rows of a parsed plain step-time CSV (`df`, all strings) from file `p`."""
    unknown = [c for c in df.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise SpecError(f"{p}: unknown column {unknown[0]!r}; expected {', '.join(REQUIRED + OPTIONAL)}")
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise SpecError(f"{p}: missing column {missing[0]!r}; expected columns {', '.join(REQUIRED)}")
    if df.height == 0:
        raise SpecError(f"{p}: no data rows")
    model_slugs, hw_slugs = set(_models.preset_slugs()), set(_hw.preset_slugs())
    out = []
    for i, r in enumerate(df.iter_rows(named=True)):
        line = i + 2
        cell = lambda c: (r.get(c) or "").strip()  # noqa: E731
        for col in ("series", "target", "hardware"):
            if not cell(col):
                raise cells.err(p, line, col, "", f"a non-empty {col}")
        if r["metric"] not in METRICS:
            raise cells.err(p, line, "metric", r["metric"], f"one of {', '.join(METRICS)}")
        given = [c for c in LOADS if cell(c)]
        if len(given) != 1:
            raise cells.err(p, line, given[1] if given else "concurrency", r.get(given[1]) if given else "",
                                "exactly one of concurrency, qps and batch (the load the time was measured under)")
        load = {given[0]: cells.model_input(p, line, given[0], r[given[0]], optional=False)}
        if r["metric"] == "decode_step" and given[0] != "batch":
            raise cells.err(p, line, "metric", "decode_step", "a metric of a row under load (tpot, itl, itl_p50, "
                                "inv_tput, e2e_request_latency); decode_step needs a batch")
        if cell("weight_dtype") not in BYTES_PER_ELEMENT:  # required: an empty cell is refused too
            raise cells.err(p, line, "weight_dtype", r["weight_dtype"] if cell("weight_dtype") else "",
                            f"one of {', '.join(BYTES_PER_ELEMENT)}")
        value = cells.number(p, line, "value_s", r["value_s"], "seconds > 0", lambda v: 0 < v < 1e5)
        layout = {c: v for c in ("ep", "dp_attention") if (v := cells.model_input(p, line, c, r.get(c))) is not None}
        engine = cell("engine")
        if engine and not engine.replace("-", "").replace("_", "").isalnum():
            raise cells.err(p, line, "engine", engine, "an engine name (letters, digits, - and _)")
        why = next((f"column {c}: {r[c]!r}; expected a preset slug ({', '.join(sorted(k)[:4])}, ...) or a path"
                    for c, k in (("target", model_slugs), ("hardware", hw_slugs)) if not cells.known(r[c], k)),
                   None)
        out.append(StepRow(
            line=line, series=r["series"], target=r["target"], hardware=r["hardware"],
            tp=cells.model_input(p, line, "tp", r["tp"], optional=False),
            weight_dtype=canonical(r["weight_dtype"]),
            kv_dtype=cells.dtype(p, line, "kv_dtype", r.get("kv_dtype")),
            expert_dtype=cells.dtype(p, line, "expert_dtype", r.get("expert_dtype")),
            compute_dtype=cells.compute_dtype(p, line, r.get("compute_dtype")),
            input_len=cells.model_input(p, line, "input_len", r["input_len"], optional=False),
            output_len=cells.model_input(p, line, "output_len", r["output_len"], optional=False),
            metric=r["metric"], value_s=value, source_url=cell("source_url"), engine=engine,
            dataset=cell("dataset"), approximate=cell("approximate") == "yes", unsupported=why, **layout, **load))
    return check_buildable(out)


def stack(rows_, profiles, dtype=None, roofline="operator"):
    """Pytrees of supported plain rows stacked on a leading axis: (Hardware, Deployment, target, draft,
    Decode). Each row's engine profile (`profiles`, one `EngineProfile` per row) is applied to its
    hardware, and its `Load` carries the row's lengths and the engine's scheduler limits on that GPU for
    a plain server (`inputs.scheduler`); the decode context is the load's mean, L_in + L_out / 2, and the
    batch the row's (1 where it has none)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from ..cost.trees import Load
    from . import scheduler

    dtype = dtype or jnp.float32
    default = engines.load(engines.DEFAULT)
    built, out = {}, []
    for r, prof in zip(rows_, profiles):
        key = (*r.build_key, id(prof))
        if key not in built:
            sc = r.scenario(roofline)
            try:
                _, deploy, tgt, dr, dec = sc.build(dtype)
            except SpecError as e:
                raise SpecError(f"line {r.line}: {e}") from None
            hw_prof = prof.apply(sc.check()[0])
            built[key] = (hw_prof.resolve(sc.compute_dtype, dtype, roofline), deploy, tgt, dr, dec,
                          scheduler.engine_limits(prof, default, hw_prof, speculative=False))
        hw, deploy, tgt, dr, dec, lim = built[key]
        as_dt = lambda v: jnp.asarray(v, dtype)  # noqa: E731
        load = Load(qps=as_dt(r.qps or 1.0), input_len=as_dt(r.input_len), output_len=as_dt(r.output_len),
                    max_num_seqs=as_dt(lim["max_num_seqs"]), chunk_tokens=as_dt(lim["chunk_tokens"]))
        dec = dec.replace(batch=as_dt(r.batch or 1.0), context=as_dt(r.input_len + 0.5 * r.output_len), load=load)
        out.append((hw, deploy, tgt, dr, dec))
    if any(d.parallel for _, d, _, _, _ in out):  # one tree structure: the general layout kernels
        out = [(h, d.replace(parallel=True), t, dr, x) for h, d, t, dr, x in out]
    return jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])), *out)
