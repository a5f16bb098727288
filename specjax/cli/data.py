"""Commands on measurements and figures: `validate`, `calibrate`, `plot` (registered on `cli.app`)."""

import json
import pathlib
from typing import Annotated, Optional

import typer

from .. import api
from ..inputs import hardware as _hw
from ..errors import SpecError
from ..inputs.scenario import Scenario
from .app import (Context, Draft, DraftCost, Drafter, DrafterChoice, Json, K, KvDtype, Roof, RooflineChoice, Tp,
                  app, choices, print_json, table, value)


def _load_profiles(paths):
    profiles = {}
    for path in paths or []:
        prof = _hw.load(path)
        if not prof.calibrated_for:
            raise SpecError(f"hardware profile {path!r} has no calibrated_for key naming the hardware it replaces")
        profiles[prof.calibrated_for] = prof
    return profiles


def _writetable(df, path):
    from ..outputs import io

    p = pathlib.Path(path)
    if p.suffix not in (".csv", ".parquet"):
        raise SpecError(f"out={path!r}; expected a .csv or .parquet file name")
    if p.suffix == ".csv":
        io.write_bytes_atomic(p, df.write_csv().encode())
    else:
        io.write_parquet_atomic(df, p, {"specjax_versions": json.dumps(io.versions())})


Csv = Annotated[str, typer.Argument(metavar="FILE.csv", help="Measurements CSV (schema: data/measured/README.md).")]


@app.command()
def validate(csv: Csv,
             hardware_profile: Annotated[Optional[list[str]], typer.Option(
                 help="Calibrated hardware TOML (repeatable); replaces the preset named by its calibrated_for.")
             ] = None,
             roofline: Roof = RooflineChoice.operator,
             out: Annotated[Optional[str], typer.Option(help="Write the per-row table (.csv or .parquet).")] = None,
             as_json: Json = False):
    """Predict every measured speedup and report the errors."""
    from ..inputs import measured
    from ..engine import validate as _validate

    roofline = value(roofline)
    rows = measured.load(csv)
    df, summary = _validate.evaluate(rows, _load_profiles(hardware_profile), roofline)
    if out:
        _writetable(df, out)
    if not as_json:
        import polars as pl

        with pl.Config(tbl_rows=12, tbl_cols=12, tbl_width_chars=160, float_precision=3):
            print(df.group_by("target", "drafter").agg(
                pl.len().alias("rows"), pl.col("ape").filter(~pl.col("anchor")).median().alias("median_ape"),
                pl.col("side_ok").filter(~pl.col("anchor")).mean().alias("side_accuracy")).sort("target", "drafter"))
        table([(k_, v) for k_, v in summary.items()])
    print_json(summary)


@app.command()
def calibrate(csv: Csv,
              out: Annotated[str, typer.Option(help="Profile TOML to write (a hardware file).")] = "profile.toml",
              hardware: Annotated[Optional[str], typer.Option(
                  "--hardware", help="Calibrate this hardware's rows (default: the only one in the file).")] = None,
              fit_locality: Annotated[bool, typer.Option(help="Also fit the MoE expert-locality factor.")] = True,
              fit_overlap: Annotated[bool, typer.Option(help="Also fit the roofline non-overlap sigma.")] = True,
              hbm_efficiency: Annotated[float, typer.Option(
                  help="eta_W held fixed when the CSV has no step times (speedups fix only ratios).")] = 0.85,
              holdout_fraction: Annotated[float, typer.Option(help="Share of series held out.")] = 0.3,
              steps: Annotated[int, typer.Option(help="optax steps.", min=10, max=100000)] = 1500,
              roofline: Roof = RooflineChoice.operator, as_json: Json = False):
    """Fit efficiencies, fixed overhead (and expert locality, overlap) to measurements; write a profile."""
    from ..engine import calibrate as _cal
    from ..outputs import io
    from ..inputs import measured
    from ..engine import validate as _validate

    roofline = value(roofline)
    if not 0 <= holdout_fraction < 1:
        raise SpecError(f"holdout_fraction={holdout_fraction}; expected 0 <= x < 1")
    if not 0.2 <= hbm_efficiency <= 1:
        raise SpecError(f"hbm_efficiency={hbm_efficiency}; expected 0.2 <= x <= 1")
    if not out.endswith(".toml"):
        raise SpecError(f"out={out!r}; expected a .toml file name")
    rows = measured.load(csv)
    slugs = sorted({r.hardware for r in rows})
    if hardware is None:
        if len(slugs) > 1:
            counts = {h: sum(r.hardware == h for r in rows) for h in slugs}
            raise SpecError(f"the file has rows for {counts}; choose one with --hardware")
        hardware = slugs[0]
    rows = [r for r in rows if r.hardware == hardware]
    if not rows:
        raise SpecError(f"hardware={hardware!r}; expected one of {', '.join(slugs)} (hardware in {csv})")
    cal = _cal.fit(rows, mode=roofline, fit_locality=fit_locality, fit_overlap=fit_overlap,
                   hbm_efficiency=hbm_efficiency, holdout_fraction=holdout_fraction, steps=steps)
    report = {}
    for part, names in (("train", cal.train_series), ("heldout", cal.heldout_series)):
        sub = [r for r in rows if r.series in set(names)]
        if sub:
            report[f"{part}_before"] = _validate.evaluate(sub, None, roofline)[1]
            report[f"{part}_after"] = _validate.evaluate(sub, cal.profiles, roofline)[1]
    stats = dict(data=str(csv), fitted=", ".join(cal.fit_fields), rows=len(rows),
                 train_series=len(cal.train_series), heldout_series=len(cal.heldout_series),
                 **{f"{k}_median_ape": v["median_ape"] for k, v in report.items()},
                 **{f"{k}_p90_ape": v["p90_ape"] for k, v in report.items()})
    io.write_bytes_atomic(pathlib.Path(out), _cal.profile_toml(cal.profiles[hardware], stats).encode())
    result = dict(hardware=hardware, profile=out, values=cal.values[hardware], fitted=list(cal.fit_fields),
                  final_loss=float(cal.loss_history[-1]), initial_loss=float(cal.loss_history[0]), **report)
    if as_json:
        print_json(result)
        return
    print(f"calibrated {hardware} on {len(cal.train_series)} series ({len(cal.heldout_series)} held out); "
          f"wrote {out}")
    table([(k_, v) for k_, v in cal.values[hardware].items()])
    print(f"\n{'split':<16} {'median APE':>11} {'p90 APE':>9} {'side acc.':>10}")
    for k_, v in report.items():
        print(f"{k_:<16} {v['median_ape']:>11.3%} {v['p90_ape']:>9.3%} {v['side_accuracy']:>10.3%}")


PlotKind = choices("PlotKind", ("speedup", "crossover-map", "sensitivity", "roofline", "optimal-k", "validation"))


@app.command()
def plot(kind: Annotated[PlotKind, typer.Argument(help="What to draw.")],
         out: Annotated[str, typer.Option(help="Output path without suffix; writes .png and .svg.")] = "figure",
         source: Annotated[Optional[str], typer.Option(
             "--from", help="Sweep output directory (speedup, crossover-map) or measurements CSV (validation).")
         ] = None,
         target: Annotated[Optional[list[str]], typer.Option(help="Target(s) when plotting from model flags.")] = None,
         hardware: Annotated[Optional[list[str]], typer.Option("--hardware", help="Hardware preset(s)/file(s).")
                             ] = None,
         drafter: Drafter = DrafterChoice.ratio, draft: Draft = None, draft_cost: DraftCost = None, tp: Tp = 1,
         k: K = 2,
         alpha: Annotated[Optional[list[float]], typer.Option(help="Acceptance rate(s).")] = None,
         context: Context = 2048.0, kv_dtype: KvDtype = None, roofline: Roof = RooflineChoice.operator,
         batch: Annotated[Optional[list[float]], typer.Option(help="Batches (roofline; default grids otherwise).")
                          ] = None,
         x: Annotated[Optional[str], typer.Option(help="crossover-map: column on the x axis.")] = None,
         y: Annotated[Optional[str], typer.Option(help="crossover-map: column on the y axis.")] = None,
         as_json: Json = False):
    """Draw a figure (PNG and SVG) from a sweep directory or from model flags."""
    import numpy as np

    from ..outputs import curves, plots

    kind, drafter, roofline = value(kind), value(drafter), value(roofline)
    alphas = alpha or [0.814]
    for a in alphas:
        if not 0 <= a <= 1:
            raise SpecError(f"alpha={a!r}; expected 0 <= alpha <= 1")

    def scenarios():
        if not target or not hardware:
            raise SpecError(f"plot {kind} needs --from DIR or model flags (--target and --hardware)")
        return {f"{t}@{pathlib.Path(h).stem}" if len(hardware) > 1 else t:
                Scenario(target=t, hardware=h, drafter=drafter, draft=draft, draft_cost=draft_cost, tp=tp, k=k,
                         alpha=alphas[0], context=context, kv_dtype=kv_dtype, roofline=roofline)
                for t in target for h in hardware}

    if kind in ("speedup", "crossover-map") and source:
        if not pathlib.Path(source).is_dir():
            raise SpecError(f"--from {source!r}: not a sweep output directory")
        df = plots.from_sweep(source)
        if kind == "speedup":
            if "speedup" not in df.columns or "batch_seqs" not in df.columns:
                raise SpecError(f"--from {source!r}: plot speedup needs a sweep with a batch axis and no reduction")
            fig, data = plots.speedup_figure(df)
        else:
            if "crossover_batch" not in df.columns:
                raise SpecError(f"--from {source!r}: plot crossover-map needs a sweep with reduce.kind = 'crossover'")
            for name, v in (("x", x), ("y", y)):
                if v not in df.columns:
                    raise SpecError(f"{name}={v!r}; expected a column of the sweep: {', '.join(df.columns)}")
            fig, data = plots.crossover_map_figure(df, x, y)
    elif kind == "speedup":
        fig, data = plots.speedup_figure(curves.speedup_grid(scenarios(), np.geomspace(1, 4096, 97)))
    elif kind == "crossover-map":
        raise SpecError("plot crossover-map needs --from DIR (a sweep with reduce.kind = 'crossover')")
    elif kind == "sensitivity":
        res = {label: api.sensitivity(sc)["elasticities"] for label, sc in scenarios().items()}
        fig, data = plots.sensitivity_figure(res)
    elif kind == "roofline":
        (label, sc), = list(scenarios().items())[:1]
        hw_, deploy, tgt, _, _ = sc.build()
        batches = batch or [1, 64, 1024]
        points = curves.roofline_points(hw_, deploy, tgt, batches, float(k), context)
        fig, data = plots.roofline_figure(points, float(hw_.flops_per_s * hw_.flops_efficiency),
                                          float(hw_.hbm_bytes_per_s * hw_.hbm_efficiency), batches, float(k), label)
    elif kind == "optimal-k":
        (label, sc), = list(scenarios().items())[:1]
        grid = curves.optimal_k_grid(sc, alpha or [0.5, 0.6, 0.7, 0.8, 0.9], np.geomspace(1, 4096, 49))
        fig, data = plots.optimal_k_figure(grid, title=f"Best draft length k*: {label}")
    else:  # validation
        from ..inputs import measured
        from ..engine import validate as _validate

        if not source:
            raise SpecError("plot validation needs --from FILE.csv (measurements)")
        df, _ = _validate.evaluate(measured.load(source), None, roofline)
        fig, data = plots.validation_figure(df)
    paths = plots.save(fig, out)
    if as_json:
        print_json(dict(files=[str(p) for p in paths], rows=data.height, columns=data.columns))
    else:
        print(f"wrote {', '.join(str(p) for p in paths)} ({data.height} data rows)")
