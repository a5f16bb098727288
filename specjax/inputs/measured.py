"""Published speculative-decoding measurements (CSV), validated row by row into model inputs.

Schema: `data/measured/README.md` (series, target, drafter, draft, hardware, tp, batch, k,
acceptance_rate, accepted_length, context, weight_dtype, measured_speedup, metric, approximate,
source_url). Optional extension columns `t_base_s` and `t_sd_step_s` (measured step times, seconds)
make absolute efficiencies identifiable in calibration. Every error names the file, the line,
the column, the value and what is allowed. `stack` turns the rows into one batch of pytrees
(leading axis = row) so the whole data set is evaluated by one vmapped kernel.
"""

import dataclasses
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl

from . import drafters
from . import hardware as _hw
from . import models as _models
from .dtypes import BYTES_PER_ELEMENT, canonical
from ..errors import SpecError, read_text
from .scenario import Scenario
from ..cost.trees import Decode

COLUMNS = ("series", "target", "drafter", "draft", "hardware", "tp", "batch", "k", "acceptance_rate",
           "accepted_length", "context", "weight_dtype", "measured_speedup", "metric", "approximate", "source_url")
OPTIONAL = ("t_base_s", "t_sd_step_s")
MAX_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class Row:
    line: int
    series: str
    target: str
    drafter: str
    draft: str | None
    hardware: str
    tp: int
    batch: float
    k: int
    alpha: float | None
    tau: float | None
    context: float
    weight_dtype: str
    speedup: float
    metric: str
    source_url: str
    t_base_s: float | None = None
    t_sd_step_s: float | None = None

    @property
    def source(self):
        """Short label of where the row comes from (the URL without its scheme)."""
        return self.source_url.split("://", 1)[-1].removeprefix("www.")

    def scenario(self, hardware=None, roofline="operator"):
        return Scenario(target=self.target, hardware=hardware or self.hardware, drafter=self.drafter,
                        draft=self.draft or None, tp=self.tp, batch=self.batch, k=self.k, alpha=0.5,
                        context=self.context, weight_dtype=self.weight_dtype, roofline=roofline)


def _err(path, line, col, value, allowed):
    return SpecError(f"{path} line {line}, column {col}: {value if value is not None else ''!r}; expected {allowed}")


def _number(path, line, col, raw, allowed, ok, integer=False, optional=False):
    if raw is None or raw.strip() == "":
        if optional:
            return None
        raise _err(path, line, col, raw or "", allowed)
    try:
        v = float(raw)
    except ValueError:
        raise _err(path, line, col, raw, allowed) from None
    if not math.isfinite(v) or not ok(v) or (integer and not v.is_integer()):
        raise _err(path, line, col, raw, allowed)
    return int(v) if integer else v


def _known(value, slugs):
    return bool(value) and (value in slugs or pathlib.Path(value).is_file())


def load(path):
    """Read and validate a measurements CSV; returns a list of `Row`."""
    p = pathlib.Path(path)
    text = read_text(p, "measurements file", MAX_BYTES)
    try:
        df = pl.read_csv(text.encode(), infer_schema=False, truncate_ragged_lines=False)
    except Exception as e:  # polars raises several types for malformed CSV
        raise SpecError(f"malformed CSV {str(p)!r}: {str(e).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SpecError(f"{p}: missing column {missing[0]!r}; expected columns {', '.join(COLUMNS)}")
    unknown = [c for c in df.columns if c not in COLUMNS + OPTIONAL]
    if unknown:
        raise SpecError(f"{p}: unknown column {unknown[0]!r}; expected {', '.join(COLUMNS + OPTIONAL)}")
    if df.height == 0:
        raise SpecError(f"{p}: no data rows")
    model_slugs, hw_slugs = set(_models.preset_slugs()), set(_hw.preset_slugs())
    rows = []
    for i, r in enumerate(df.iter_rows(named=True)):
        line = i + 2
        if not r["series"]:
            raise _err(p, line, "series", "", "a non-empty series id")
        for col, known in (("target", model_slugs), ("hardware", hw_slugs)):
            if not _known(r[col], known):
                raise _err(p, line, col, r[col], f"a preset slug ({', '.join(sorted(known)[:4])}, ...) or a path")
        if r["drafter"] not in drafters.names(measurable_only=True):
            raise _err(p, line, "drafter", r["drafter"], f"one of {', '.join(drafters.names(measurable_only=True))}")
        if drafters.get(r["drafter"]).needs_draft:
            if not _known(r["draft"], model_slugs):
                raise _err(p, line, "draft", r["draft"] or "", "a draft model or EAGLE head preset for this drafter")
        tp = _number(p, line, "tp", r["tp"], "an integer >= 1", lambda v: v >= 1, integer=True)
        batch = _number(p, line, "batch", r["batch"], "a number >= 1", lambda v: v >= 1)
        k = _number(p, line, "k", r["k"], "an integer in [1, 64]", lambda v: 1 <= v <= 64, integer=True)
        alpha = _number(p, line, "acceptance_rate", r["acceptance_rate"], "empty or in [0, 1]",
                        lambda v: 0 <= v <= 1, optional=True)
        tau = _number(p, line, "accepted_length", r["accepted_length"], f"empty or in [1, k+1 = {k + 1}]",
                      lambda v: 1 <= v <= k + 1, optional=True)
        ctx = _number(p, line, "context", r["context"], "a number of tokens >= 0", lambda v: 0 <= v <= 1e8)
        speed = _number(p, line, "measured_speedup", r["measured_speedup"], "a number > 0 (SD / no-SD)",
                        lambda v: 0 < v < 100)
        if r["metric"] not in ("throughput", "latency"):
            raise _err(p, line, "metric", r["metric"], "throughput or latency")
        if r["weight_dtype"] not in BYTES_PER_ELEMENT:
            raise _err(p, line, "weight_dtype", r["weight_dtype"], f"one of {', '.join(BYTES_PER_ELEMENT)}")
        times = {c: _number(p, line, c, r.get(c), "empty or seconds > 0", lambda v: v > 0, optional=True)
                 for c in OPTIONAL}
        rows.append(Row(line=line, series=r["series"], target=r["target"], drafter=r["drafter"],
                        draft=r["draft"] or None, hardware=r["hardware"], tp=tp, batch=batch, k=k, alpha=alpha,
                        tau=tau, context=ctx, weight_dtype=canonical(r["weight_dtype"]), speedup=speed,
                        metric=r["metric"], source_url=r["source_url"] or "", **times))
    return rows


def stack(rows, profiles=None, dtype=jnp.float32, roofline="operator"):
    """Pytrees for all rows, stacked on a leading axis: (Hardware, Deployment, target, draft, Decode).

    `profiles` maps a hardware slug to a `HardwareProfile` that replaces the preset (calibrated).
    Rows sharing a configuration share one build.
    """
    cache, built = {}, []
    for r in rows:
        key = (r.target, r.drafter, r.draft, r.hardware, r.tp, r.weight_dtype)
        if key not in cache:
            sc = r.scenario(roofline=roofline)
            try:
                hw, deploy, tgt, dr, _ = sc.build(dtype)
            except SpecError as e:
                raise SpecError(f"line {r.line}: {e}") from None
            if profiles and r.hardware in profiles:
                hw = profiles[r.hardware].resolve(sc.compute_dtype, dtype, roofline)
            cache[key] = (hw, deploy, tgt, dr)
        built.append((*cache[key], _decode(r, dtype)))
    return jax.tree.map(lambda *xs: jnp.stack(xs), *built)


def _decode(r, dtype):
    return Decode(**{k: jnp.asarray(v, dtype) for k, v in dict(
        batch=r.batch, k=r.k, alpha=r.alpha if r.alpha is not None else 0.5, context=r.context,
        draft_cost_ratio=0.0).items()})


def series_index(rows):
    """Integer series id per row, and the list of series names (first-seen order)."""
    names = list(dict.fromkeys(r.series for r in rows))
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[r.series] for r in rows]), names
