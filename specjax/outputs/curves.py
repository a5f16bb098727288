"""Frames for figures, computed by the kernels (never by a second implementation of the model).

`speedup_grid` evaluates `speculative.step` over batches, `optimal_k_grid` the optax k* search,
`roofline_points` the per-operator roofline times of `roofline.operator_times` (non-overlap and
efficiencies included), each through a compiled kernel of `engine.curve_kernels`, `serving_grid`
`api.serve` and `concurrency_grid` `api.serve_concurrency`; each returns a polars DataFrame that `plots`
draws.
"""

import pathlib

import jax.numpy as jnp
import numpy as np
import polars as pl

from ..cost.roofline import OPERATORS
from ..cost.status import Closed, Point
from ..engine import curve_kernels


def speedup_grid(scenarios, batches):
    """Evaluate `{label: Scenario}` over `batches` into the columns `speedup_figure` reads."""
    frames = []
    for label, sc in scenarios.items():
        b = np.asarray(batches, np.float32)
        r = curve_kernels.speedup_over_batch(*sc.build(), b)
        frames.append(pl.DataFrame(dict(hardware=[pathlib.Path(sc.hardware).stem] * len(b), pair=[label] * len(b),
                                        batch_seqs=b, speedup=np.asarray(r.speedup),
                                        status=list(Point.decode(np.asarray(r.status))))))
    return pl.concat(frames)


def optimal_k_grid(scenario, alphas, batches, k_max=16):
    """k* (optax search) over alphas x batches for one `Scenario`; k* and its speedup are null where the
    batch does not fit in memory with the drafter (`status`), as in `api.optimize`."""
    a, b = np.meshgrid(np.asarray(alphas, np.float32), np.asarray(batches, np.float32), indexing="ij")
    o, status = curve_kernels.optimal_k(*scenario.build(), a.ravel(), b.ravel(), k_max)
    ok = np.asarray(status) == int(Point.OK)
    return pl.DataFrame(dict(alpha=a.ravel(), batch=b.ravel(),
                             k_star=pl.Series(np.asarray(o.k_star)).set(pl.Series(~ok), None),
                             speedup=pl.Series(np.asarray(o.speedup)).set(pl.Series(~ok), None),
                             status=list(Point.decode(np.asarray(status)))))


def roofline_points(hw, deploy, model, batches, k, context):
    """Each operator of the decode (q = 1) and verify (q = k+1) passes at each batch: intensity,
    achieved FLOP/s (FLOPs / the kernel's operator time) and the bound. Returns a DataFrame."""
    passes = []
    for q, kind in ((1.0, "decode"), (k + 1.0, "verify")):
        times = curve_kernels.operators_over_batch(hw, deploy, model, jnp.asarray(np.asarray(batches, float)),
                                                   jnp.asarray(q), jnp.asarray(float(context)))
        passes.append((kind, *(np.asarray(x, float) for x in times)))  # each (operators, batches)
    rows = []
    for i, b in enumerate(batches):
        for kind, flops, nbytes, t_math, t_mem, t in passes:
            for j, name in enumerate(OPERATORS):
                if flops[j, i] > 0 and nbytes[j, i] > 0:
                    rows.append(dict(batch=float(b), pass_kind=kind, operator=name,
                                     intensity=float(flops[j, i] / nbytes[j, i]),
                                     achieved_flops_per_s=float(flops[j, i] / t[j, i]),
                                     bound="compute" if t_math[j, i] > t_mem[j, i] else "memory"))
    return pl.DataFrame(rows)


def serving_grid(scenarios, points=41):
    """`api.serve` for each `{label: Scenario}` (with a load) on `points` rates from 1% to 120% of the
    larger sustainable rate: (rows with label, qps, both sides' TPOT and batch, the ratio and the status;
    {label: switch_off_qps, max_qps_base, max_qps_sd, curve_status}). A scenario whose one request does not fit
    has a mark and no rows; if none fits, a `SpecError` says so."""
    from .. import api

    frames, marks = [], {}
    for label, sc in scenarios.items():
        r = api.serve(sc, points=points)
        marks[label] = {k: r[k] for k in ("switch_off_qps", "max_qps_base", "max_qps_sd", "curve_status")}
        if not r["points"]:  # one request does not fit (`Curve.SD_DOES_NOT_FIT`): no curve, its mark says so
            continue
        df = pl.DataFrame(r["points"]).select("qps", "tpot_base_s", "tpot_sd_s", "batch_base", "batch_sd",
                                              "speedup_tpot", "status")
        frames.append(df.with_columns(pl.lit(label).alias("label")).cast({c: pl.Float64 for c in df.columns
                                                                         if c != "status"}))
    if not frames:
        from ..cost.status import Curve
        from ..errors import SpecError

        raise SpecError(f"nothing to plot: {', '.join(marks)}: {Curve.SD_DOES_NOT_FIT.text('over_rate')} (status "
                        f"{Curve.SD_DOES_NOT_FIT.label}; lower --input-len or --output-len, or raise --tp)")
    return pl.concat(frames), marks


CLOSED_COLUMNS = ("concurrency", "tpot_base_s", "tpot_sd_s", "throughput_base_tok_s", "throughput_sd_tok_s",
                  "batch_base", "batch_sd", "ratio_e2e", "status_base", "status_sd", "status")
CLOSED_MARKS = ("switch_off_concurrency", "max_concurrency_base", "max_concurrency_sd", "curve_status")
UNFIT = (Closed.SD_DOES_NOT_FIT, Closed.MODEL_DOES_NOT_FIT, Closed.INVALID_INPUT)  # points without a curve


def concurrency_grid(scenarios, points=41):
    """`api.serve_concurrency` for each `{label: Scenario}` (with a load) on `points` whole client counts N
    (log-spaced, repeats at small N kept) from 1 to 1.5 times the largest of both sides' batch caps and the
    switch-off concurrency (found on a first, wide grid of the same length, so one compiled program serves
    both calls): (rows with label and
    `CLOSED_COLUMNS`; {label: `CLOSED_MARKS`}). A scenario whose one request does not fit has a mark and
    no rows; if none fits, a `SpecError` says so."""
    from .. import api

    frames, marks = [], {}
    for label, sc in scenarios.items():
        wide = api.serve_concurrency(sc, np.round(np.geomspace(1.0, 65536.0, points)))
        top = max([wide[k] or 0.0 for k in CLOSED_MARKS[:3]] + [16.0])
        r = api.serve_concurrency(sc, np.round(np.geomspace(1.0, 1.5 * top, points)))  # same length: one compile
        marks[label] = {k: r[k] for k in CLOSED_MARKS}
        rows = [p for p in r["points"] if Closed.of(p["status"]) not in UNFIT]
        if not rows:
            continue
        df = pl.DataFrame(rows).select(CLOSED_COLUMNS)
        frames.append(df.with_columns(pl.lit(label).alias("label")).cast(
            {c: pl.Float64 for c in CLOSED_COLUMNS if not c.startswith("status")}))
    if not frames:
        from ..cost.status import Curve
        from ..errors import SpecError

        raise SpecError(f"nothing to plot: {', '.join(marks)}: {Curve.SD_DOES_NOT_FIT.text('over_clients')} (status "
                        f"{Curve.SD_DOES_NOT_FIT.label}; lower --input-len or --output-len, or raise --tp)")
    return pl.concat(frames), marks
