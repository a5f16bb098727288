"""The typer app, the options shared by commands (choices as Enums built from the registries) and
the output helpers. Command groups live in `cli.model`, `cli.data` and `cli.sweep`; `cli.main` runs."""

import enum
import functools
import inspect

from typing import Annotated, Optional

import typer

from .. import __version__
from ..outputs.finite import finite, json_text
from ..inputs import drafters
from ..errors import SpecError
from .. import catalogue
from .. import _lazy

_scenario = _lazy.module("specjax.inputs.scenario")


def choices(name, values):
    """A str Enum of the allowed values of an option (typer shows and checks them)."""
    return enum.Enum(name, {v: v for v in values}, type=str)


DrafterChoice = choices("DrafterChoice", drafters.names())
RooflineChoice = choices("RooflineChoice", catalogue.INPUTS["roofline"].choices)
MethodChoice = choices("MethodChoice", ("optax", "brute"))


def value(x):
    """The plain value of an Enum option (or the value itself)."""
    return x.value if isinstance(x, enum.Enum) else x

def _once(parser, why):
    """`parser` (click's, of `command`) refusing a single-valued option given more than once (click would
    keep the last silently). The check runs where click parses, so it sees every option wherever it stands
    (global ones before the command, `--k=3` and `--k 3`, a value that looks like a flag) and nothing else."""
    parse = parser.parse_args

    def parse_args(args):
        opts, rest, order = parse(args=args)
        seen = {}
        for param in order:
            if getattr(param, "multiple", False) or not getattr(param, "opts", None):
                continue
            seen[param] = seen.get(param, 0) + 1
            if seen[param] == 2:
                n = sum(p is param for p in order)
                raise SpecError(f"{param.opts[0]} given {n} times; expected once ({why})")
        return opts, rest, order

    parser.parse_args = parse_args
    return parser


class _Command(typer.core.TyperCommand):
    def make_parser(self, ctx):
        return _once(super().make_parser(ctx), f"{self.name} takes one value; repeat only the options "
                                                     "whose help says so, or run a sweep")


class _Group(typer.core.TyperGroup):
    def make_parser(self, ctx):
        return _once(super().make_parser(ctx), "a global option, given before the command")


class _App(typer.Typer):
    """The typer app whose every command parses its options through `_once`."""

    def command(self, *args, cls=None, **kw):
        return super().command(*args, cls=cls or _Command, **kw)


app = _App(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, cls=_Group,
           help="Does speculative decoding pay for this target, drafter, hardware, batch and context?")

def rate_list(text, name="rates"):
    """'0.8,0.6,0.5' -> (0.8, 0.6, 0.5); a bad entry is a one-line error naming the option."""
    parts = str(text).replace(" ", "").split(",")
    if parts == [""]:
        return ()  # nothing given: the scenario's check names the empty vector
    if "" in parts[:-1]:  # '0.5,,0.3' dropped the empty entry and shifted every later position by one
        raise SpecError(f"{name}={text!r}: entry {parts.index('') + 1} is empty; expected comma-separated rates "
                        "such as 0.8,0.6,0.5")
    try:
        return tuple(float(v) for v in parts if v != "")
    except ValueError:
        raise SpecError(f"{name}={text!r}; expected comma-separated rates such as 0.8,0.6,0.5") from None


PANELS = {"system": "What runs where", "point": "Operating point", "load": "Serving load"}
_CHOICES = {"drafter": DrafterChoice}  # registered names: the registry's Enum (typer shows and checks them)


def option(row, many=False):
    """(annotation, default) of the CLI option of catalogue row `row`: its type from the row's kind, its
    help and panel from the row, its default the row's (`flag_default` where the CLI's differs); `many`:
    a repeatable option (a list)."""
    if row.kind == "number":
        kind = int if row.integer or row.whole else float
    elif row.kind in ("choice", "registered"):
        kind = _CHOICES.get(row.name) or choices(f"{row.name.title()}Choice", row.choices)
    else:
        kind = str  # names, dtypes, and rate vectors as comma-separated text
    default = row.flag_default if row.flag_default is not None else row.default
    required = default is catalogue.REQUIRED
    if many:
        kind, default = list[kind], None
    elif required:
        default = inspect.Parameter.empty
    elif default is None:
        kind = Optional[kind]
    elif isinstance(kind, type) and issubclass(kind, enum.Enum):
        default = kind(default)
    flag = "--" + row.name.replace("_", "-")
    text = row.help + (" Repeatable." if many else "")  # what `_once` tells a user who repeats another option
    return Annotated[kind, typer.Option(flag, help=text, rich_help_panel=PANELS[row.group])], default


def flag_rows(which):
    """The catalogue rows of the CLI options `which` ("model" or "load"), in catalogue order."""
    return [r for r in catalogue.INPUTS.values() if r.flag == which]


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
    from .. import runtime, store

    if cache_dir is not None and no_cache:
        raise SpecError(f"--cache-dir={cache_dir!r} and --no-cache contradict each other; give one of them")
    if cache_dir is not None and not cache_dir.strip():
        raise SpecError(f"--cache-dir={cache_dir!r}; expected a directory (--no-cache turns the cache off)")
    if no_cache:
        store.enable(None)
    else:
        runtime.enable_cache(cache_dir)
    if profile:
        PROFILE.append(runtime.Profile().listen())


PROFILE = []  # the `--profile` of this run (printed by `cli.main` when the command ends)


def scenario(ignore_memory=False, **kw):
    """A validated `Scenario` from model flags (Enum options unwrapped); refuses weights that do not fit."""
    kw = {k: value(v) for k, v in kw.items()}
    for name, row in catalogue.SCENARIO.items():
        if row.kind == "rates" and isinstance(kw.get(name), str):
            kw[name] = rate_list(kw[name], name)
    sc = _scenario.Scenario(**kw)
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
    print(json_text(_json_numbers(finite(obj))))


def emit(result, as_json):
    """One JSON object, or a two-column table of the same keys (an `inputs` dict as key=value lines)."""
    if as_json:
        print_json(result)
        return
    table([(k, v) for k, v in result.items() if k != "inputs"])
    if "inputs" in result:
        print_inputs(result["inputs"])


def _word(k, v):
    """One `key=value` of the echo; a {name: source} mapping (`scheduler_source`) as its short sources: the
    part of each before its first ';' (the full text is in --json), names sharing one source joined."""
    if isinstance(v, dict):
        by = {}
        for name, src in v.items():
            by.setdefault(str(src).split(";")[0], []).append(name)
        return f"{k}=" + "; ".join(f"{'+'.join(names)}: {src}" for src, names in by.items())
    return f"{k}={int(v) if isinstance(v, float) and v.is_integer() else v}"


def print_inputs(inputs):
    """The resolved inputs as `key=value` pairs, wrapped to 100 columns."""
    words = [_word(k, v) for k, v in inputs.items() if v is not None]
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


BatchMax = Annotated[float, typer.Option(help="Largest batch searched (2 to 1e8).")]
Roof, ROOF_DEFAULT = option(catalogue.INPUTS["roofline"])  # validate and calibrate take the mode alone


def model_command(fn=None, *, load=(), many=(), memory=True):
    """Register `fn(model, **own)` as a command taking the model flags of the catalogue (`flag_rows
    ("model")`) plus its own options; the model flags arrive as one dict `model`. `load`: the load flags
    it takes (names, or True for all), which arrive as a dict `load`; `many`: flags given as repeatable
    lists (e.g. several targets for a figure); `memory`: the command refuses weights that do not fit
    unless --ignore-memory (a figure marks such points instead: no flag)."""
    if fn is None:
        return functools.partial(model_command, load=load, many=many, memory=memory)
    kw_only = inspect.Parameter.KEYWORD_ONLY
    rows = {"model": flag_rows("model"), "load": [r for r in flag_rows("load") if load is True or r.name in load]}
    groups = {g: [inspect.Parameter(r.name, kw_only, annotation=a, default=d)
                  for r in rs for a, d in [option(r, r.name in many)]] for g, rs in rows.items()}
    if memory:
        groups["model"].append(inspect.Parameter("ignore_memory", kw_only, annotation=IgnoreMem, default=False))
    own = [p.replace(kind=kw_only) for p in inspect.signature(fn, eval_str=True).parameters.values()
           if p.name not in groups]
    shared = groups["model"] + groups["load"]

    @functools.wraps(fn)
    def command(**kw):
        split = {g: {p.name: kw.pop(p.name) for p in ps} for g, ps in groups.items()}
        return fn(split["model"], **({"load": split["load"]} if rows["load"] else {}), **kw)

    command.__signature__ = inspect.Signature(shared + own)
    command.__annotations__ = {p.name: p.annotation for p in shared + own}
    del command.__wrapped__
    return app.command(name=fn.__name__)(command)
