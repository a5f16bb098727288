"""Command line: `specjax point | crossover | presets | seed`.

Each command gathers options into a `Scenario`, calls one library function and prints a
table, or one JSON object with `--json`. Bad input: one line on stderr, exit code 2.
"""

import dataclasses
import functools
import inspect
import json
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
             method: Annotated[str, typer.Option(help="optax (gradient search) | brute (every integer k).")
                               ] = "optax",
             batch_max: BatchMax = 65536.0, as_json: Json = False):
    """Best draft length k* at each batch, and the batch beyond which speculation should be off."""
    sc = _scenario(**model)
    batches = batch or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    bad = [b for b in batches if not 1 <= b <= 1e7]
    if bad:
        raise SpecError(f"batch={bad[0]!r}; expected 1 <= batch <= 1e7 (sequences)")
    if method not in ("optax", "brute"):
        raise SpecError(f"method={method!r}; expected optax or brute")
    r = api.optimize(sc, batches, k_max, batch_max, method=method)
    if as_json:
        _print_json(r)
        return
    print(f"{'batch':>8} {'k*':>4} {'speedup':>9}")
    for row in r["k_star_by_batch"]:
        print(f"{row['batch']:>8g} {row['k_star']:>4d} {row['speedup']:>9.4f}")
    off = r["switch_off_batch"]
    print(f"\nswitch speculation off above batch {off:.1f}" if off else "\nspeculation pays up to the batch bound")


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


from . import cli_data, cli_sweep  # noqa: E402,F401  (register their commands on `app`)


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
