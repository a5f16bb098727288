"""Command line: `specjax point | crossover | presets | seed`.

Each command gathers options into a `Scenario`, calls one library function and prints a
table, or one JSON object with `--json`. Bad input: one line on stderr, exit code 2.
"""

import dataclasses
import functools
import inspect
import json
import pathlib
import sys
from typing import Annotated, Optional

import typer

from . import __version__, api
from . import hardware as _hw
from . import models as _models
from . import seed as _seed
from .errors import SpecError
from .scenario import Scenario

# typer >= 0.2x vendors click; reach its exception classes through the public BadParameter.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Does speculative decoding pay for this target, drafter, hardware, batch and context?")

Target = Annotated[str, typer.Option(help="Target model: preset slug or config.json path.")]
Drafter = Annotated[str, typer.Option(help="model | eagle | mtp | ngram | ratio.")]
Draft = Annotated[Optional[str], typer.Option(help="Draft model or EAGLE head: slug or config.json path.")]
DraftCost = Annotated[Optional[float], typer.Option(help="Draft pass cost / target pass cost (drafter=ratio).")]
Hw = Annotated[str, typer.Option("--hardware", help="Accelerator: preset slug or hardware TOML path.")]
Tp = Annotated[int, typer.Option(help="Tensor-parallel degree (GPUs per replica).")]
K = Annotated[int, typer.Option("--k", help="Draft length: tokens proposed per step.")]
Alpha = Annotated[Optional[float], typer.Option(help="Per-token acceptance rate in [0, 1].")]
Tau = Annotated[Optional[float], typer.Option(help="Mean accepted length per step incl. bonus token, in [1, k+1].")]
Context = Annotated[float, typer.Option(help="Tokens in each sequence's KV cache.")]
WDtype = Annotated[Optional[str], typer.Option(help="Weight dtype for all weights (default: from config).")]
EDtype = Annotated[Optional[str], typer.Option(help="Weight dtype for routed experts only.")]
KvDtype = Annotated[Optional[str], typer.Option(help="KV-cache dtype (default: weight dtype).")]
CDtype = Annotated[str, typer.Option(help="Compute dtype whose peak FLOP/s applies.")]
Roof = Annotated[str, typer.Option(help="operator (per-operator roofline) | pass (one roofline per pass).")]
MemFrac = Annotated[float, typer.Option(help="Usable fraction of HBM.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
IgnoreMem = Annotated[bool, typer.Option("--ignore-memory", help="Evaluate even if the weights do not fit in "
                                                               "tp x HBM (pure roofline, as many blog posts do).")]


def _version(value: bool):
    if value:
        print(f"specjax {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version.")] = False):
    """specjax: a roofline model of speculative decoding."""


def _scenario(ignore_memory=False, **kw):
    kw["draft_cost"] = kw.pop("draft_cost", None)
    sc = Scenario(**kw)
    if not ignore_memory:
        msg = sc.memory_error()
        if msg:
            raise SpecError(msg)
    return sc


def _print_json(obj):
    print(json.dumps(obj, allow_nan=False))


def _emit(result, as_json):
    """One JSON object, or a two-column table of the same keys."""
    if as_json:
        _print_json(result)
    else:
        _table(list(result.items()))


def _table(rows):
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        if isinstance(v, float):
            v = f"{v:.6g}"
        print(f"{k:<{width}}  {v}")


_MODEL_FLAGS = [  # (name, annotation, default): the operating point, shared by the model commands
    ("target", Target, inspect.Parameter.empty), ("hardware", Hw, inspect.Parameter.empty),
    ("drafter", Drafter, "ratio"), ("draft", Draft, None), ("draft_cost", DraftCost, None), ("tp", Tp, 1),
    ("k", K, 2), ("alpha", Alpha, None), ("accepted_length", Tau, None), ("context", Context, 2048.0),
    ("weight_dtype", WDtype, None), ("expert_dtype", EDtype, None), ("kv_dtype", KvDtype, None),
    ("compute_dtype", CDtype, "bf16"), ("roofline", Roof, "operator"), ("memory_fraction", MemFrac, 0.9),
    ("ignore_memory", IgnoreMem, False)]
BatchMax = Annotated[float, typer.Option(help="Largest batch searched.", min=2)]


def model_command(fn):
    """Register `fn(model, **own)` as a command taking the shared model flags plus its own options;
    the model flags arrive as one dict `model`."""
    kw_only = inspect.Parameter.KEYWORD_ONLY
    shared = [inspect.Parameter(n, kw_only, annotation=a, default=d) for n, a, d in _MODEL_FLAGS]
    own = [p.replace(kind=kw_only) for p in inspect.signature(fn, eval_str=True).parameters.values()
           if p.name != "model"]
    names = {n for n, _, _ in _MODEL_FLAGS}

    @functools.wraps(fn)
    def command(**kw):
        return fn({k_: kw.pop(k_) for k_ in list(kw) if k_ in names}, **kw)

    command.__signature__ = inspect.Signature(shared + own)
    command.__annotations__ = {p.name: p.annotation for p in shared + own}
    del command.__wrapped__
    return app.command(name=fn.__name__)(command)


@model_command
def point(model, batch: Annotated[float, typer.Option(help="Decode batch (sequences).")],
          as_json: Json = False):
    """Speedup, step times, throughputs and memory at one operating point."""
    _emit(api.point(_scenario(batch=batch, **model)), as_json)


@model_command
def crossover(model, batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Smallest batch at which speculation stops paying (S(B) < 1)."""
    _emit(api.crossover(_scenario(**model), batch_max), as_json)


@model_command
def sensitivity(model, batch_max: BatchMax = 65536.0, as_json: Json = False):
    """What moves the crossover batch: elasticities (%% change of B* per %% change of each input)."""
    r = api.sensitivity(_scenario(**model), batch_max)
    if as_json:
        _print_json(r)
        return
    if r["crossover_batch"] is None:
        print(f"no crossover ({r['status']}): sensitivities are undefined")
        return
    print(f"crossover batch B* = {r['crossover_batch']:.2f} ({r['status']})\n")
    print(f"{'input':<18} {'elasticity':>11} {'dB*/dinput':>14}")
    for name, e in r["elasticities"].items():
        print(f"{name:<18} {e:>11.4f} {r['derivatives'][name]:>14.6g}")


@model_command
def optimize(model,
             batch: Annotated[Optional[list[float]], typer.Option(help="Batches to optimise at (repeatable).")] = None,
             k_max: Annotated[int, typer.Option(help="Largest draft length considered.", min=1, max=64)] = 16,
             batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Best draft length k* at each batch, and the batch beyond which speculation should be off.
    (--k only matters with --accepted-length: the draft length tau was measured at.)"""
    sc = _scenario(**model)
    batches = batch or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    bad = [b for b in batches if not 1 <= b <= 1e7]
    if bad:
        raise SpecError(f"batch={bad[0]!r}; expected 1 <= batch <= 1e7 (sequences)")
    r = api.optimize(sc, batches, k_max, batch_max)
    if as_json:
        _print_json(r)
        return
    print(f"{'batch':>8} {'k*':>4} {'speedup':>9}")
    for row in r["k_star_by_batch"]:
        print(f"{row['batch']:>8g} {row['k_star']:>4d} {row['speedup']:>9.4f}")
    off = r["switch_off_batch"]
    print(f"\nswitch speculation off above batch {off:.1f}" if off else "\nspeculation pays up to the batch bound")


@app.command()
def sweep(spec_file: Annotated[str, typer.Argument(metavar="SPEC", help="Sweep spec (TOML), e.g. sweeps/seed.toml.")],
          out: Annotated[str, typer.Option(help="Output directory (hive-partitioned Parquet).")] = "out/sweep",
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (points, chunks, bytes, memory) "
                                                "and exit.")] = False,
          resume: Annotated[bool, typer.Option(help="Continue an interrupted sweep, skipping finished chunks.")] = False,
          overwrite: Annotated[bool, typer.Option(help="Replace earlier results in --out.")] = False,
          devices: Annotated[Optional[int], typer.Option(help="Local devices to shard over (default: all).")] = None,
          x64: Annotated[bool, typer.Option("--x64", help="Evaluate in float64 (default float32).")] = False,
          coordinator: Annotated[Optional[str], typer.Option(help="host:port of process 0 for multi-process runs "
                                                             "(jax.distributed).")] = None,
          num_processes: Annotated[int, typer.Option(help="Processes in a multi-process run.", min=1)] = 1,
          process_id: Annotated[int, typer.Option(help="This process's index in a multi-process run.", min=0)] = 0,
          quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
          as_json: Json = False):
    """Evaluate a sweep spec on the device(s) and write result grids (Parquet)."""
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    if process_id >= num_processes:
        raise SpecError(f"process_id={process_id}; expected 0 <= process_id < num_processes={num_processes}")
    if num_processes > 1:
        if not coordinator:
            raise SpecError("num_processes > 1 needs --coordinator host:port")
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    from . import spec as _spec
    from . import summary as _summary
    from . import sweep as _sweep

    sp = _spec.load(spec_file)
    if dry_run:
        d = _sweep.dry_run(sp, devices, num_processes)
        if as_json:
            _print_json(d)
        else:
            _table([(k_, v) for k_, v in d.items() if k_ not in ("columns", "memory_detail")])
        return
    _sweep.preflight(sp, out, resume, overwrite, num_processes)
    if quiet or as_json:
        res = _sweep.run(sp, out, resume=resume, overwrite=overwrite, n_devices=devices, process_id=process_id,
                         num_processes=num_processes)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        cols = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} rows"),
                TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
        with Progress(*cols, transient=False) as bar:
            task = bar.add_task(sp.name, total=sp.rows, rate="")
            t0 = __import__("time").perf_counter()

            def tick(done, total):
                dt = max(__import__("time").perf_counter() - t0, 1e-9)
                bar.update(task, completed=done, total=total, rate=f"{done * sp.points / max(sp.rows, 1) / dt:,.0f} "
                                                                    "points/s")

            res = _sweep.run(sp, out, resume=resume, overwrite=overwrite, n_devices=devices, process_id=process_id,
                             num_processes=num_processes, progress=tick)
    if as_json:
        _print_json(res)
        return
    print(f"{sp.name}: {res['rows']:,} rows ({res['points']:,} points) in {res['wall_s']:.2f} s; "
          f"{res['chunks_written']} chunks written, {res['chunks_skipped']} resumed; results in {out}")
    if num_processes == 1:
        import polars as pl

        with pl.Config(tbl_rows=50, tbl_cols=20, tbl_width_chars=200, float_precision=3):
            print(_summary.summarize(out))


def _load_profiles(paths):
    profiles = {}
    for path in paths or []:
        prof = _hw.load(path)
        if not prof.calibrated_for:
            raise SpecError(f"hardware profile {path!r} has no calibrated_for key naming the hardware it replaces")
        profiles[prof.calibrated_for] = prof
    return profiles


def _write_table(df, path):
    from . import io

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
                 help="Calibrated hardware TOML (repeatable); replaces the preset named by its calibrated_for.")] = None,
             roofline: Roof = "operator",
             out: Annotated[Optional[str], typer.Option(help="Write the per-row table (.csv or .parquet).")] = None,
             as_json: Json = False):
    """Predict every measured speedup and report the errors."""
    from . import measured
    from . import validate as _validate

    if roofline not in ("operator", "pass"):
        raise SpecError(f"roofline={roofline!r}; expected operator or pass")
    rows = measured.load(csv)
    df, summary = _validate.evaluate(rows, _load_profiles(hardware_profile), roofline)
    if out:
        _write_table(df, out)
    if not as_json:
        import polars as pl

        with pl.Config(tbl_rows=12, tbl_cols=12, tbl_width_chars=160, float_precision=3):
            print(df.group_by("target", "drafter").agg(
                pl.len().alias("rows"), pl.col("ape").filter(~pl.col("anchor")).median().alias("median_ape"),
                pl.col("side_ok").filter(~pl.col("anchor")).mean().alias("side_accuracy")).sort("target", "drafter"))
        _table([(k_, v) for k_, v in summary.items()])
    _print_json(summary)


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
              roofline: Roof = "operator", as_json: Json = False):
    """Fit efficiencies, fixed overhead (and expert locality, overlap) to measurements; write a profile."""
    from . import calibrate as _cal
    from . import io, measured
    from . import validate as _validate

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
        _print_json(result)
        return
    print(f"calibrated {hardware} on {len(cal.train_series)} series ({len(cal.heldout_series)} held out); "
          f"wrote {out}")
    _table([(k_, v) for k_, v in cal.values[hardware].items()])
    print(f"\n{'split':<16} {'median APE':>11} {'p90 APE':>9} {'side acc.':>10}")
    for k_, v in report.items():
        print(f"{k_:<16} {v['median_ape']:>11.3%} {v['p90_ape']:>9.3%} {v['side_accuracy']:>10.3%}")


@app.command()
def plot(kind: Annotated[str, typer.Argument(help="speedup | crossover-map | sensitivity | roofline | optimal-k | "
                                                  "validation")],
         out: Annotated[str, typer.Option(help="Output path without suffix; writes .png and .svg.")] = "figure",
         source: Annotated[Optional[str], typer.Option(
             "--from", help="Sweep output directory (speedup, crossover-map) or measurements CSV (validation).")] = None,
         target: Annotated[Optional[list[str]], typer.Option(help="Target(s) when plotting from model flags.")] = None,
         hardware: Annotated[Optional[list[str]], typer.Option("--hardware", help="Hardware preset(s)/file(s).")] = None,
         drafter: Drafter = "ratio", draft: Draft = None, draft_cost: DraftCost = None, tp: Tp = 1, k: K = 2,
         alpha: Annotated[Optional[list[float]], typer.Option(help="Acceptance rate(s).")] = None,
         context: Context = 2048.0, kv_dtype: KvDtype = None, roofline: Roof = "operator",
         batch: Annotated[Optional[list[float]], typer.Option(help="Batches (roofline; default grids otherwise).")] = None,
         x: Annotated[Optional[str], typer.Option(help="crossover-map: column on the x axis.")] = None,
         y: Annotated[Optional[str], typer.Option(help="crossover-map: column on the y axis.")] = None,
         as_json: Json = False):
    """Draw a figure (PNG and SVG) from a sweep directory or from model flags."""
    import numpy as np

    from . import plots

    if kind not in plots.KINDS:
        raise SpecError(f"kind={kind!r}; expected one of {', '.join(plots.KINDS)}")
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
        fig, data = plots.speedup_figure(plots.speedup_grid(scenarios(), np.geomspace(1, 4096, 97)))
    elif kind == "crossover-map":
        raise SpecError("plot crossover-map needs --from DIR (a sweep with reduce.kind = 'crossover')")
    elif kind == "sensitivity":
        res = {label: api.sensitivity(sc)["elasticities"] for label, sc in scenarios().items()}
        fig, data = plots.sensitivity_figure(res)
    elif kind == "roofline":
        (label, sc), = list(scenarios().items())[:1]
        hw_, tgt, _, _ = sc.build()
        fig, data = plots.roofline_figure(hw_, tgt, batch or [1, 64, 1024], float(k), context, float(tp), label)
    elif kind == "optimal-k":
        (label, sc), = list(scenarios().items())[:1]
        grid = plots.optimal_k_grid(sc, alpha or [0.5, 0.6, 0.7, 0.8, 0.9], np.geomspace(1, 4096, 49))
        fig, data = plots.optimal_k_figure(grid, title=f"Best draft length k*: {label}")
    else:  # validation
        from . import measured
        from . import validate as _validate

        if not source:
            raise SpecError("plot validation needs --from FILE.csv (measurements)")
        df, _ = _validate.evaluate(measured.load(source), None, roofline)
        fig, data = plots.validation_figure(df)
    paths = plots.save(fig, out)
    if as_json:
        _print_json(dict(files=[str(p) for p in paths], rows=data.height, columns=data.columns))
    else:
        print(f"wrote {', '.join(str(p) for p in paths)} ({data.height} data rows)")


@app.command()
def report(spec_file: Annotated[str, typer.Argument(metavar="SPEC", help="Sweep spec (TOML).")],
           out: Annotated[str, typer.Option(help="Report directory (index.html, figures/, data/).")] = "out/report",
           resume: Annotated[bool, typer.Option(help="Reuse finished chunks of an earlier run.")] = False):
    """Run a sweep and write a self-contained HTML report with figures, key numbers and assumptions."""
    from . import report as _report
    from . import spec as _spec

    path = _report.write(_spec.load(spec_file), out, resume=resume)
    print(f"wrote {path}")


@app.command()
def presets(as_json: Json = False):
    """List model and hardware presets with their key numbers."""
    rows = {"models": [], "hardware": []}
    for slug in _models.preset_slugs():
        a = _models.load_architecture(slug)
        m = _models.eagle_head(a, a) if a.eagle_version else _models.target(a)
        rows["models"].append(dict(slug=slug, total_params_b=round(float(m.total_params) / 1e9, 3),
                                   active_params_b=round(float(m.active_params) / 1e9, 3),
                                   layers=a.n_layers, experts=a.n_experts, top_k=a.top_k,
                                   weight_dtype=a.weight_dtype, expert_dtype=a.expert_dtype,
                                   kind="eagle-head" if a.eagle_version else ("moe" if a.n_moe_layers else "dense")))
    for slug in _hw.preset_slugs():
        h = _hw.load(slug)
        rows["hardware"].append(dict(slug=slug, name=h.name, bf16_tflops=h.flops_per_s.get("bf16", 0) / 1e12,
                                     hbm_tb_s=h.hbm_bytes_per_s / 1e12, hbm_gb=h.hbm_bytes / 1e9,
                                     dtypes=",".join(h.flops_per_s)))
    if as_json:
        _print_json(rows)
        return
    print(f"{'model':<22} {'kind':<10} {'total B':>9} {'active B':>9} {'layers':>6} {'E':>4} {'r':>3}  weights")
    for r in rows["models"]:
        print(f"{r['slug']:<22} {r['kind']:<10} {r['total_params_b']:>9.3f} {r['active_params_b']:>9.3f} "
              f"{r['layers']:>6} {r['experts']:>4} {r['top_k']:>3}  {r['weight_dtype']}/{r['expert_dtype']}")
    print(f"\n{'hardware':<14} {'bf16 TFLOP/s':>12} {'TB/s':>6} {'HBM GB':>7}  dtypes")
    for r in rows["hardware"]:
        print(f"{r['slug']:<14} {r['bf16_tflops']:>12.1f} {r['hbm_tb_s']:>6.3f} {r['hbm_gb']:>7.0f}  {r['dtypes']}")


@app.command()
def seed(as_json: Json = False):
    """The headline scenario: Llama-3-70B vs gpt-oss-120b on an H200, speedup vs batch and crossovers."""
    out = {}
    for slug, sc in _seed.scenarios().items():
        curve = [dict(batch=b, **{k_: v for k_, v in api.point(dataclasses.replace(sc, batch=float(b))).items()
                                  if k_ in ("speedup", "status")}) for b in _seed.BATCHES]
        out[slug] = dict(crossover=api.crossover(sc), curve=curve, published=_seed.PUBLISHED[slug])
    if as_json:
        _print_json(out)
        return
    print("Headline scenario: H200 (989.5 TFLOP/s bf16, 4.8 TB/s), whole-pass roofline, fp8 KV, context 2048,")
    print("drafter cost ratio c = 0.145, k = 2, alpha = 0.814.\n")
    print(f"{'batch':>6}  " + "  ".join(f"{s:>14}" for s in out))
    for i, b in enumerate(_seed.BATCHES):
        cells = []
        for s in out:
            p = out[s]["curve"][i]
            cells.append(f"{p['speedup']:>13.3f}{'*' if p['status'] != 'ok' else ' '}")
        print(f"{b:>6}  " + "  ".join(cells))
    print("(* = does not fit in 0.9 x 141 GB with this batch; the article ignored capacity)\n")
    for s, o in out.items():
        c = o["crossover"]
        print(f"{s}: crossover at batch {c['crossover_batch']:.1f} ({c['status']}); published "
              f"{o['published']['crossover']}; max batch in memory {c['max_batch_sd']}")


def main(argv=None):
    """Console entry point: runs the app, turning bad input into one line on stderr and exit 2."""
    try:
        code = app(args=argv, standalone_mode=False, prog_name="specjax")
    except SpecError as e:
        print(f"specjax: error: {e}", file=sys.stderr)
        sys.exit(2)
    except _ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            print(e.format_message())
            sys.exit(0)
        print(f"specjax: error: {' '.join(e.format_message().split())}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
