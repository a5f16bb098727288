"""Commands on measurements and figures: `validate`, `calibrate`, `plot` (registered on `cli.app`)."""

import dataclasses
import itertools
import json
import pathlib
from typing import Annotated, Optional

import typer

import numpy as np

from .. import _lazy, catalogue
from ..errors import SpecError
from .app import ROOF_DEFAULT, Json, Roof, app, choices, model_command, print_json, scenario, value

api = _lazy.module("specjax.api")


def _writetable(df, path):
    """Write a table to PATH (.csv or .parquet), atomically, its folder created."""
    from ..outputs import io

    p = pathlib.Path(path)
    if p.suffix not in (".csv", ".parquet"):
        raise SpecError(f"out={path!r}; expected a .csv or .parquet file name")
    io.make_parent(p)
    if p.suffix == ".csv":
        io.write_csv_atomic(df, p)
    else:
        io.write_parquet_atomic(df, p, {"specjax_versions": json.dumps(io.versions())})


Csv = Annotated[str, typer.Argument(metavar="FILE.csv", help="Measurements CSV (schema: data/measured/README.md).")]
Csvs = Annotated[list[str], typer.Argument(metavar="FILE.csv...", help="Measurements CSVs (schema: "
                                           "data/measured/README.md), read as one data set.")]
EngineOpt = Annotated[Optional[str], typer.Option(
    "--engine", help="Engine profile for every row: roofline (pure model), vllm, sglang, trtllm or an engine "
                     "TOML. Default: each row's engine column (empty: vllm).")]


def _load_rows(paths):
    from ..inputs import measured

    rows = []
    for path in paths:
        rows += measured.load(path)
    return rows


def _pct(v):
    return "-" if v is None else f"{v:.1%}"


LOAD_LABELS = {"batch": "per batch", "qps": "request rate", "concurrency": "closed loop"}  # `validate.summarize`


def _metric_table(summary):
    """Overall, level and shape metrics, then the groups, as aligned text (fits 100 columns); then the
    plain step-time block."""
    if not summary["rows"]:  # a file of plain step times only
        _plain_table(summary)
        return
    print(f"{'':<34} {'rows':>5} {'median APE':>11} {'p90 APE':>9} {'side of 1':>10}")
    lines = [("all scored rows", summary), ("level (batch 1 / lowest load)", summary["level"]),
             ("shape (the rest)", summary["shape"])]
    for kind, m in summary.get("by_load", {}).items():  # per load kind, with its level and shape rows
        lines += [(f"load {kind}: {LOAD_LABELS[kind]}", m), (f"  {kind}: level", m["level"]),
                  (f"  {kind}: shape", m["shape"])]
    for key, groups in summary["groups"].items():
        lines += [(f"{key}: {name}"[:34], m) for name, m in groups.items()]
    for label, m in lines:
        print(f"{label:<34} {m['rows_scored']:>5} {_pct(m['median_ape']):>11} {_pct(m['p90_ape']):>9} "
              f"{_pct(m['side_accuracy']):>10}")
    _balanced_lines(summary)
    print(f"\nrows {summary['rows']}: {summary['rows_scored']} scored, {summary['rows_anchor']} acceptance anchors, "
          f"{summary['rows_inconsistent']} inconsistent, {summary['rows_unsupported']} unsupported")
    for reason in summary["unsupported_reasons"]:
        print(f"  unsupported: {reason}")
    _plain_table(summary)


def _plain_table(summary):
    """The plain step-time block (`plain_steps`): pooled, source-balanced and per group; ratio =
    predicted / measured (below 1: the model is fast)."""
    p = summary.get("plain_steps")
    if not p:
        return
    head = "plain step times (no speculation)"
    print(f"\n{head:<50} {'rows':>5} {'median APE':>11} {'p90 APE':>9} {'pred/meas':>10}")
    lines = [("all scored rows", p)] + [(f"{key}: {name.removeprefix('github.com/')}"[:50], m)
                                        for key, groups in p["groups"].items() for name, m in groups.items()]
    for label, m in lines:
        ratio = "-" if m["median_ratio"] is None else f"{m['median_ratio']:.2f}"
        print(f"{label:<50} {m['rows_scored']:>5} {_pct(m['median_ape']):>11} {_pct(m['p90_ape']):>9} {ratio:>10}")
    _balanced_lines(p)
    print(f"plain rows {p['rows']}: {p['rows_scored']} scored, {p['rows_unsupported']} unsupported, "
          f"{p['rows_not_predicted']} without a prediction")
    for reason in p["unsupported_reasons"]:
        print(f"  skipped: {reason}")


def _balanced_lines(summary):
    """The source-balanced headline (docs/model.md §13) under the pooled numbers."""
    worst = summary.get("worst_source")
    if worst is None:
        return
    print(f"source-balanced median APE {_pct(summary['source_balanced_median_ape'])} (median over "
          f"{summary['sources_scored']} sources of each source's median); worst source {worst['source']} "
          f"{_pct(worst['median_ape'])}")


@app.command()
def validate(csv: Csvs, engine: EngineOpt = None,
             leave_one_source_out: Annotated[bool, typer.Option(
                 "--leave-one-source-out", help="Score each source with engine profiles calibrated on the "
                                                "other sources only.")] = False,
             steps: Annotated[int, typer.Option(help="optax steps per calibration (--leave-one-source-out).",
                                                min=10, max=100000)] = 600,
             roofline: Roof = ROOF_DEFAULT,
             out: Annotated[Optional[str], typer.Option(help="Write the per-row table (.csv or .parquet).")] = None,
             as_json: Json = False):
    """Predict every measured speedup and report the errors (docs/model.md §13)."""
    from ..engine import calibrate as _cal
    from ..engine import transfer
    from ..engine import validate as _validate

    from ..outputs import io

    roofline = value(roofline)
    io.check_out(out, "a .csv or .parquet file name")
    io.refuse_input(out, [*csv, engine])
    io.refuse_repeated(csv, "measurements file")
    rows = _load_rows(csv)
    if leave_one_source_out:
        if engine is not None:
            raise SpecError("--leave-one-source-out calibrates its own profiles; drop --engine")
        try:
            df, summary = transfer.leave_one_source_out(rows, steps, roofline,
                                                        progress=None if as_json else _cal.print_progress)
        except ValueError as e:
            raise SpecError(str(e)) from None
    else:
        if engine is not None:
            from ..inputs import engines

            engines.load(engine)  # a clear error for an unknown name before any work
        df, summary = _validate.evaluate(rows, engine, None, roofline)
    if out:
        _writetable(df, out)
    if as_json:
        print_json(summary)
    else:
        _metric_table(summary)


@app.command()
def calibrate(csv: Csvs,
              out: Annotated[str, typer.Option(help="Engine profile TOML to write (use it with --engine FILE).")
                             ] = "engine.toml",
              engine: Annotated[Optional[str], typer.Option(
                  "--engine", help="Calibrate the rows of this engine column value (default: every row).")] = None,
              name: Annotated[Optional[str], typer.Option(help="Profile name (default: the engine or 'calibrated').")
                              ] = None,
              hbm_efficiency: Annotated[float, typer.Option(
                  help="eta_W held fixed when the CSV has no step times (speedups fix only ratios).")] = 0.85,
              holdout_fraction: Annotated[float, typer.Option(help="Share of series held out.")] = 0.3,
              steps: Annotated[int, typer.Option(help="optax steps.", min=10, max=100000)] = 1500,
              roofline: Roof = ROOF_DEFAULT, as_json: Json = False):
    """Fit an engine profile (efficiencies and overheads, docs/model.md §12) to measurements; write it as TOML."""
    from ..engine import calibrate as _cal
    from ..engine import validate as _validate
    from ..outputs import io

    roofline = value(roofline)
    if not 0 <= holdout_fraction < 1:
        raise SpecError(f"holdout_fraction={holdout_fraction}; expected 0 <= x < 1")
    if not 0.3 <= hbm_efficiency <= 1:
        raise SpecError(f"hbm_efficiency={hbm_efficiency}; expected 0.3 <= x <= 1")
    if not out.endswith(".toml"):
        raise SpecError(f"out={out!r}; expected a .toml file name")
    io.refuse_input(out, csv)
    io.refuse_repeated(csv, "measurements file")
    rows = [r for r in _load_rows(csv) if not r.is_step]  # plain step times are scored by validate, not fitted
    if engine is not None:
        known = sorted({r.engine_name for r in rows})
        rows = [r for r in rows if r.engine_name == engine]
        if not rows:
            raise SpecError(f"engine={engine!r}; expected one of {', '.join(known)} (the engine column of {csv[0]})")
    cal = _cal.fit(rows, name=name or engine or "calibrated", hbm_efficiency=hbm_efficiency,
                   holdout_fraction=holdout_fraction, steps=steps, progress=None if as_json else _cal.print_progress)
    report = {}
    for part, names in (("train", cal.train_series), ("heldout", cal.heldout_series)):
        sub = [r for r in rows if r.series in set(names)]
        if sub:
            report[f"{part}_roofline"] = _validate.evaluate(sub, "roofline", None, roofline)[1]
            report[f"{part}_calibrated"] = _validate.evaluate(sub, cal.profile, None, roofline)[1]
    stats = dict(data=", ".join(csv), rows=cal.rows, train_series=len(cal.train_series),
                 heldout_series=len(cal.heldout_series), condition=cal.condition,
                 **{f"{k}_median_ape": v["median_ape"] for k, v in report.items()},
                 **{f"{k}_p90_ape": v["p90_ape"] for k, v in report.items()})
    io.write_bytes_atomic(pathlib.Path(out), _cal.profile_toml(cal, stats).encode())
    result = dict(profile=out, values=cal.values, identified=list(cal.identified), held=list(cal.held),
                  not_identified=list(cal.not_identified),
                  std_errors=cal.std_errors, condition=cal.condition, final_loss=float(cal.loss_history[-1]),
                  initial_loss=float(cal.loss_history[0]),
                  **{k: {m: v[m] for m in ("rows_scored", "median_ape", "p90_ape", "side_accuracy")}
                     for k, v in report.items()})
    if as_json:
        print_json(result)
        return
    print(f"calibrated {cal.profile.name} on {cal.rows} rows of {len(cal.train_series)} series "
          f"({len(cal.heldout_series)} held out); wrote {out}")
    print(f"{'parameter':<18} {'value':>12} {'std error':>11}  status")
    for k_ in cal.values:
        se = cal.std_errors.get(k_)
        status = "identified" if k_ in cal.identified else "fitted, not identified" if k_ in cal.not_identified \
            else "held"
        print(f"{k_:<18} {cal.values[k_]:>12.5g} {('-' if se is None else f'{se:.3g}'):>11}  {status}")
    print(f"Hessian condition number {cal.condition:.3g}")
    print(f"\n{'split':<20} {'median APE':>11} {'p90 APE':>9} {'side acc.':>10}")
    for k_, v in report.items():
        print(f"{k_:<20} {_pct(v['median_ape']):>11} {_pct(v['p90_ape']):>9} {_pct(v['side_accuracy']):>10}")


@dataclasses.dataclass(frozen=True)
class _PlotRequest:
    """What `plot` was asked: the figure kind, the model and load flags (targets, hardware and alphas as
    lists), the --from source, batches and crossover-map axes."""

    kind: str
    model: dict
    load: dict
    source: str | None
    batch: list | None
    x: str | None
    y: str | None

    def scenarios(self, needs_alpha=True):
        """{label: Scenario} for every target x hardware x alpha given (the other model flags shared)."""
        m = dict(self.model)
        targets, hardware, alphas = m.pop("target"), m.pop("hardware"), m.pop("alpha")
        if not targets or not hardware:
            raise SpecError(f"plot {self.kind} needs --from DIR or model flags (--target and --hardware)")
        if needs_alpha and not alphas:
            raise SpecError(f"plot {self.kind} needs --alpha (repeat it for several curves)")
        alphas = alphas or [0.5]  # roofline, optimal-k: acceptance does not enter the figure
        if not needs_alpha and m["draft_cost"] is None and value(m["drafter"]) == "ratio":
            # the target alone: a drafter that needs nothing, and no drafter-only keys
            m.update(drafter="ngram", draft_tp=None, tree_topk=None, tree_tokens=None, draft_kv_budget=None)
        out = {}
        for t, h, a in itertools.product(targets, hardware, alphas):
            label = " | ".join([t] + ([pathlib.Path(h).stem] if len(hardware) > 1 else [])
                               + ([f"alpha={a:g}"] if len(alphas) > 1 else []))
            out[label] = scenario(target=t, hardware=h, alpha=a, ignore_memory=True, **m,
                                  **(self.load if self.kind == "serving" else {}))
        return out

    def sweep(self, column, needs):
        """The sweep output under --from, checked to have `column` (`needs`: what it takes, for the message)."""
        from ..outputs import plots

        if not pathlib.Path(self.source).is_dir():
            raise SpecError(f"--from {self.source!r}: not a sweep output directory")
        df = plots.from_sweep(self.source)
        if column not in df.columns:
            raise SpecError(f"--from {self.source!r}: plot {self.kind} needs {needs}")
        return df


def _speedup_figure(req):
    from ..outputs import curves, plots

    if req.source:
        df = req.sweep("speedup", "a sweep with a batch axis and no reduction")
        if "batch_seqs" not in df.columns:
            raise SpecError(f"--from {req.source!r}: plot speedup needs a sweep with a batch axis and no reduction")
        return plots.speedup_figure(df)
    return plots.speedup_figure(curves.speedup_grid(req.scenarios(), np.geomspace(1, 4096, 97)))


def _crossover_map_figure(req):
    from ..outputs import plots

    if not req.source:
        raise SpecError("plot crossover-map needs --from DIR (a sweep with reduce.kind = 'crossover')")
    if req.x is not None and req.x == req.y:  # a map of one input against itself (polars raised DuplicateError)
        raise SpecError(f"x={req.x!r} and y={req.y!r}: expected two different columns of the sweep")
    df = req.sweep("crossover_batch", "a sweep with reduce.kind = 'crossover'")
    for name, v in (("x", req.x), ("y", req.y)):
        if v not in df.columns:
            raise SpecError(f"{name}={v!r}; expected a column of the sweep: {', '.join(df.columns)}")
    return plots.crossover_map_figure(df, req.x, req.y)


def _sensitivity_figure(req):
    from ..outputs import plots

    sens = {label: api.sensitivity(sc) for label, sc in req.scenarios().items()}
    ofs = {r["of"] for r in sens.values()}
    if len(ofs) > 1:
        raise SpecError("plot sensitivity: some scenarios have a switch-off batch and some do not ("
                        + ", ".join(f"{lb}: {r['status']}" for lb, r in sens.items()) + "); plot them separately")
    of = "B_off" if ofs == {"crossover_batch"} else "the speedup at batch 1"
    return plots.sensitivity_figure({lb: r["elasticities"] for lb, r in sens.items()}, of=of,
                                    title="What moves the switch-off batch B_off" if of == "B_off" else
                                    "No switch-off batch: what moves the speedup at batch 1")


def _first(req):
    """The first scenario of a single-scenario figure, and its label without the alpha."""
    (label, sc), = list(req.scenarios(needs_alpha=False).items())[:1]
    return label.split(" | alpha=")[0], sc


def _roofline_figure(req):
    from ..outputs import curves, plots

    label, sc = _first(req)
    for b in req.batch or []:
        catalogue.check("batch", b, field="--batch")
    hw_, deploy, tgt, _, _ = sc.build()
    batches = req.batch or [1, 64, 1024]
    points = curves.roofline_points(hw_, deploy, tgt, batches, float(sc.k), sc.context)
    return plots.roofline_figure(points, float(hw_.flops_per_s * hw_.flops_efficiency),
                                 float(hw_.hbm_bytes_per_s * hw_.hbm_efficiency), batches, float(sc.k), label)


def _optimal_k_figure(req):
    from ..outputs import curves, plots

    label, sc = _first(req)
    grid = curves.optimal_k_grid(sc, req.model["alpha"] or [0.5, 0.6, 0.7, 0.8, 0.9], np.geomspace(1, 4096, 49))
    return plots.optimal_k_figure(grid, title=f"Best draft length k*: {label}")


SERVING_AXES = ("qps", "concurrency")  # `plot serving --x`: an open loop over request rates, or a closed loop


def _serving_figure(req):
    from ..outputs import curves, plots

    x = req.x or SERVING_AXES[0]
    if x not in SERVING_AXES or req.y is not None:
        bad = ("y", req.y) if req.y is not None else ("x", x)
        raise SpecError(f"{bad[0]}={bad[1]!r}; plot serving takes --x {' or '.join(SERVING_AXES)} (the x axis) and "
                        "no --y")
    if x == "concurrency":
        return plots.concurrency_figure(*curves.concurrency_grid(req.scenarios()))
    return plots.serving_figure(*curves.serving_grid(req.scenarios()))


def _validation_figure(req):
    from ..engine import validate as _validate
    from ..inputs import measured
    from ..outputs import plots

    if not req.source:
        raise SpecError("plot validation needs --from FILE.csv (measurements)")
    df, _ = _validate.evaluate(measured.load(req.source), None, None, value(req.model["roofline"]))
    return plots.validation_figure(df)


FIGURES = {"speedup": _speedup_figure, "crossover-map": _crossover_map_figure, "sensitivity": _sensitivity_figure,
           "roofline": _roofline_figure, "optimal-k": _optimal_k_figure, "validation": _validation_figure,
           "serving": _serving_figure}
PlotKind = choices("PlotKind", FIGURES)


@model_command(load=True, many=("target", "hardware", "alpha"), memory=False)
def plot(model, load, kind: Annotated[PlotKind, typer.Argument(help="What to draw.")],
         out: Annotated[str, typer.Option(help="Output path without suffix; writes .png and .svg.")] = "figure",
         source: Annotated[Optional[str], typer.Option(
             "--from", help="Sweep output directory (speedup, crossover-map) or measurements CSV (validation).")
         ] = None,
         batch: Annotated[Optional[list[float]], typer.Option(help="Batches (roofline; default grids otherwise).")
                          ] = None,
         x: Annotated[Optional[str], typer.Option(help="crossover-map: column on the x axis; serving: qps "
                                                        "(request rate, default) or concurrency (closed loop).")
                      ] = None,
         y: Annotated[Optional[str], typer.Option(help="crossover-map: column on the y axis.")] = None,
         as_json: Json = False):
    """Draw a figure (PNG and SVG) from a sweep directory or from model flags (--target, --hardware and
    --alpha repeatable: one curve each)."""
    from ..outputs import io, plots

    kind = value(kind)
    io.check_out(out, "a file path without suffix such as fig/speedup (plot writes PATH.png and PATH.svg)",
                 file=True)
    for a in model["alpha"] or []:
        catalogue.check("alpha", a, field="--alpha")
    fig, data = FIGURES[kind](_PlotRequest(kind, model, load, source, batch, x, y))
    if data.height == 0:
        raise SpecError(f"plot {kind}: nothing to plot (no data rows); nothing written")
    if kind == "sensitivity" and data["elasticity"].abs().max() == 0:
        raise SpecError("plot sensitivity: every elasticity is 0 or undefined; nothing written")
    paths = plots.save(fig, out)
    hidden = data.filter(~data["shown"]).height if "shown" in data.columns else 0
    said = fig.texts[-1].get_text() if hidden and fig.texts else None  # what the figure says it left out
    if as_json:
        print_json(dict(files=[str(p) for p in paths], rows=data.height, columns=data.columns,
                        series_not_shown=hidden, not_shown=said))
    else:
        print(f"wrote {', '.join(str(p) for p in paths)} ({data.height} data rows)")
        if hidden:
            print(f"{hidden} of {data.height} series not drawn ({said})")
