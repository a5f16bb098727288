"""The typer app, the options shared by commands (choices as Enums built from the registries) and
the output helpers. Command groups live in `cli.model`, `cli.data` and `cli.sweep`; `cli.main` runs."""

import enum
import functools
import inspect
import json
from typing import Annotated, Optional

import typer

from .. import __version__
from ..api import finite
from ..inputs import drafters, engines
from ..errors import SpecError
from ..inputs.scenario import Scenario
from ..cost.trees import MODES


def choices(name, values):
    """A str Enum of the allowed values of an option (typer shows and checks them)."""
    return enum.Enum(name, {v: v for v in values}, type=str)


DrafterChoice = choices("DrafterChoice", drafters.names())
RooflineChoice = choices("RooflineChoice", MODES)
MethodChoice = choices("MethodChoice", ("optax", "brute"))


def value(x):
    """The plain value of an Enum option (or the value itself)."""
    return x.value if isinstance(x, enum.Enum) else x

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Does speculative decoding pay for this target, drafter, hardware, batch and context?")

Target = Annotated[str, typer.Option(help="Target model: preset slug or config.json path.")]
Drafter = Annotated[DrafterChoice, typer.Option(help="; ".join(f"{k.name}: {k.help}"
                                                                for k in drafters.REGISTRY.values()))]
Draft = Annotated[Optional[str], typer.Option(help="Draft model or EAGLE head: slug or config.json path.")]
DraftCost = Annotated[Optional[float], typer.Option(help="Draft pass cost / target pass cost (drafter=ratio).")]
Hw = Annotated[str, typer.Option("--hardware", help="Accelerator: preset slug or hardware TOML path.")]
Tp = Annotated[int, typer.Option(help="Tensor-parallel degree of attention (GPUs per replica: tp x dp-attention).")]
Ep = Annotated[int, typer.Option(help="Expert-parallel degree of the MoE layers (divides the experts and the GPUs).")]
DpAttn = Annotated[int, typer.Option("--dp-attention", help="Attention data-parallel ranks, each tp GPUs holding "
                                                            "1/dp of the sequences (SGLang/vLLM DP attention).")]
DraftTp = Annotated[Optional[int], typer.Option(help="The drafter's own TP degree (vLLM draft_tensor_parallel_size; "
                                                     "default: the target's layout).")]
def rate_list(text):
    """'0.8,0.6,0.5' -> (0.8, 0.6, 0.5); a bad entry gets the one-line error of the option."""
    try:
        return tuple(float(v) for v in str(text).replace(" ", "").split(",") if v != "")
    except ValueError:
        raise typer.BadParameter(f"{text!r}; expected comma-separated rates such as 0.8,0.6,0.5") from None


AccVector = Annotated[Optional[str], typer.Option(help="Conditional acceptance per draft position, a_1,a_2,... "
                                                       "(beyond the last: the last). Replaces --alpha.")]
PosRates = Annotated[Optional[str], typer.Option(help="vLLM's per-position acceptance rates r_1,r_2,... "
                                                      "(unconditional; a_i = r_i / r_(i-1)). Replaces --alpha.")]
TreeTopk = Annotated[Optional[int], typer.Option(help="Draft tree: branching per step (SGLang speculative-eagle-topk; "
                                                      "--k is the depth, speculative-num-steps).")]
TreeTokens = Annotated[Optional[int], typer.Option(help="Draft tree: tokens verified per sequence, root included "
                                                        "(SGLang speculative-num-draft-tokens).")]
KvBudget = Annotated[Optional[float], typer.Option(help="Tokens of KV the drafter keeps and reads per layer "
                                                        "(StreamingLLM / MagicDec; default: all).")]
Imbalance = Annotated[float, typer.Option(help="Busiest EP rank's routed-expert work / the mean (>= 1).")]
K = Annotated[int, typer.Option("--k", help="Draft length: tokens proposed per step.")]
Alpha = Annotated[Optional[float], typer.Option(help="Per-token acceptance rate in [0, 1].")]
Tau = Annotated[Optional[float], typer.Option(help="Mean accepted length per step incl. bonus token, in [1, k+1].")]
Context = Annotated[float, typer.Option(help="Tokens in each sequence's KV cache.")]
WDtype = Annotated[Optional[str], typer.Option(help="Weight dtype for all weights (default: from config).")]
EDtype = Annotated[Optional[str], typer.Option(help="Weight dtype for routed experts only.")]
KvDtype = Annotated[Optional[str], typer.Option(help="KV-cache dtype (default: weight dtype).")]
CDtype = Annotated[str, typer.Option(help="Compute dtype whose peak FLOP/s applies.")]
Roof = Annotated[RooflineChoice, typer.Option(help="operator (per-operator roofline) | pass (one roofline per pass).")]
MemFrac = Annotated[float, typer.Option(help="Usable fraction of HBM.")]
DEFAULT_ENGINE = engines.DEFAULT
Engine = Annotated[str, typer.Option(help="Engine profile: vllm, sglang, trtllm (fitted on published data), an "
                                          "engine TOML, or roofline (the pure model).")]
Locality = Annotated[float, typer.Option(help="MoE expert locality of the workload: 0 = sequences route "
                                              "independently, 1 = identically (one prompt copied B times).")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
IgnoreMem = Annotated[bool, typer.Option("--ignore-memory", help="Evaluate even if the weights do not fit in "
                                                               "tp x HBM (pure roofline, as many blog posts do).")]


def _version(value: bool):
    if value:
        print(f"specjax {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version.")] = False,
          no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the compilation cache.")] = False,
          cache_dir: Annotated[Optional[str], typer.Option(
              help="Compilation cache directory (default $SPECJAX_CACHE_DIR, else ~/.cache/specjax/jax).")] = None,
          profile: Annotated[bool, typer.Option("--profile", help="Print import, trace, compile and run time, and "
                                                                  "compilation-cache hits, on stderr.")] = False):
    """specjax: a roofline model of speculative decoding."""
    from .. import runtime

    if not no_cache:
        runtime.enable_cache(cache_dir)
    if profile:
        PROFILE.append(runtime.Profile().listen())


PROFILE = []  # the `--profile` of this run (printed by `cli.main` when the command ends)


def scenario(ignore_memory=False, **kw):
    """A validated `Scenario` from model flags (Enum options unwrapped); refuses weights that do not fit."""
    kw = {k: value(v) for k, v in kw.items()}
    kw["draft_cost"] = kw.pop("draft_cost", None)
    for name in ("acceptance_vector", "position_rates"):
        if kw.get(name) is not None:
            kw[name] = rate_list(kw[name])
    sc = Scenario(**kw)
    if not ignore_memory:
        msg = sc.memory_error()
        if msg:
            raise SpecError(msg)
    return sc


def _json_numbers(obj):
    """NaN and infinities -> None (`api.finite`); a float with an integer value -> an int (1, not 1.0)."""
    if isinstance(obj, float):
        return int(obj) if obj.is_integer() and abs(obj) < 2**53 else obj
    if isinstance(obj, dict):
        return {k: _json_numbers(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_numbers(v) for v in obj]
    return obj


def print_json(obj):
    print(json.dumps(_json_numbers(finite(obj)), allow_nan=False))


def emit(result, as_json):
    """One JSON object, or a two-column table of the same keys (an `inputs` dict as key=value lines)."""
    if as_json:
        print_json(result)
        return
    table([(k, v) for k, v in result.items() if k != "inputs"])
    if "inputs" in result:
        print_inputs(result["inputs"])


def print_inputs(inputs):
    """The resolved inputs as `key=value` pairs, wrapped to 100 columns."""
    words = [f"{k}={int(v) if isinstance(v, float) and v.is_integer() else v}" for k, v in inputs.items()
             if v is not None]
    line = "inputs:"
    for w in words:
        if len(line) + 1 + len(w) > 100:
            print(line)
            line = "  "
        line += " " + w
    print(line)


def table(rows):
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        if isinstance(v, float):
            v = f"{v:.6g}"
        print(f"{k:<{width}}  {v}")


_MODEL_FLAGS = [  # (name, annotation, default): the operating point, shared by the model commands
    ("target", Target, inspect.Parameter.empty), ("hardware", Hw, inspect.Parameter.empty),
    ("drafter", Drafter, DrafterChoice.ratio), ("draft", Draft, None), ("draft_cost", DraftCost, None), ("tp", Tp, 1),
    ("ep", Ep, 1), ("dp_attention", DpAttn, 1), ("draft_tp", DraftTp, None), ("expert_imbalance", Imbalance, 1.0),
    ("k", K, 2), ("alpha", Alpha, None), ("accepted_length", Tau, None), ("acceptance_vector", AccVector, None),
    ("position_rates", PosRates, None), ("tree_topk", TreeTopk, None), ("tree_tokens", TreeTokens, None),
    ("draft_kv_budget", KvBudget, None), ("context", Context, 2048.0),
    ("weight_dtype", WDtype, None), ("expert_dtype", EDtype, None), ("kv_dtype", KvDtype, None),
    ("compute_dtype", CDtype, "bf16"), ("roofline", Roof, RooflineChoice.operator), ("memory_fraction", MemFrac, 0.9),
    ("engine", Engine, DEFAULT_ENGINE), ("expert_locality", Locality, 0.0),
    ("ignore_memory", IgnoreMem, False)]
BatchMax = Annotated[float, typer.Option(help="Largest batch searched (2 to 1e8).")]
InputLen = Annotated[float, typer.Option(help="Mean prompt tokens per request (L_in).")]
OutputLen = Annotated[float, typer.Option(help="Mean output tokens per request (L_out).")]
MaxNumSeqs = Annotated[int, typer.Option(help="The engine's batch cap (vLLM --max-num-seqs).")]
ChunkTokens = Annotated[int, typer.Option(help="Prompt tokens prefilled per iteration "
                                               "(vLLM --max-num-batched-tokens).")]
LOAD_DEFAULTS = dict(input_len=1024.0, output_len=128.0, max_num_seqs=256, chunk_tokens=2048)  # vllm bench serve's
# random-dataset lengths, vLLM's long-standing max_num_seqs and a 2048-token prefill budget


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
