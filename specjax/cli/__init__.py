"""Command line: `specjax point | crossover | sensitivity | optimize | serve | sweep | report | validate |
calibrate | ingest | advise | plot | presets | seed`, with the global `--profile`, `--no-cache` and
`--cache-dir` (before the command).

Each command gathers options into a `Scenario` (or a spec / CSV), calls one library function and
prints a table, or one JSON object with `--json`. Bad input: one line on stderr, exit code 2.
Layout: `app` (the typer app, shared options, output helpers), one module per command group.
"""

import re
import sys
import time
import warnings

import typer

from ..errors import SpecError
from . import data, engine_io, model, serve, sweep  # noqa: F401  (register their commands on `app`)
from .app import app

# typer vendors click; reach its exception classes through the public BadParameter.
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_CHOICE = re.compile(r"'(?P<value>[^']*)' is not one of (?P<choices>.*?)\.?$")


def _message(e):
    """One line for a usage error; a bad choice reads like every other bad value (field=value; expected)."""
    msg = " ".join(e.format_message().split())
    param = getattr(e, "param", None)
    m = _CHOICE.search(msg)
    if m and getattr(param, "name", None):
        allowed = ", ".join(c.strip().strip("'") for c in m["choices"].split(","))
        return f"{param.name}={m['value']!r}; expected one of {allowed}"
    return msg


def repeated_option(argv):
    """The first single-valued option given more than once in `argv` (click would silently keep the last),
    as (flag, count, command), or None. Options that take lists (`multiple`) may repeat."""
    group = typer.main.get_command(app)
    words = [a for a in argv if not a.startswith("-")]
    cmd = group.commands.get(words[0]) if words else None
    if cmd is None:
        return None
    counts = {}
    for a in argv:
        flag = a.split("=", 1)[0]
        if flag.startswith("--"):
            counts[flag] = counts.get(flag, 0) + 1
    for param in cmd.params:
        if getattr(param, "multiple", False) or not getattr(param, "opts", None):
            continue
        n = sum(counts.get(o, 0) for o in param.opts if o.startswith("--"))
        if n > 1:
            return param.opts[0], n, cmd.name
    return None


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"specjax: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _run(argv):
    """The app, then the `--profile` lines (stderr) of this run, whatever the command printed."""
    from .. import IMPORT_STARTED
    from .app import PROFILE

    started = time.perf_counter()
    PROFILE.clear()
    try:
        return app(args=argv, standalone_mode=False, prog_name="specjax")
    finally:
        for p in PROFILE:
            p.start, p.imported_s = IMPORT_STARTED, started - IMPORT_STARTED
            print("\n".join(p.lines()), file=sys.stderr)


def main(argv=None):
    """Console entry point: runs the app, turning bad input into one line on stderr and exit 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # NaN and overflow are reported as statuses and nulls, never as warnings: stderr stays one line
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.showwarning = _one_line_warning  # e.g. a compilation-cache entry JAX cannot read: one line, go on
    rep = repeated_option(argv)
    if rep:
        flag, n, cmd = rep
        print(f"specjax: error: {flag} given {n} times; expected once ({cmd} takes one value; repeat only the "
              "options whose help says so, or run a sweep)", file=sys.stderr)
        sys.exit(2)
    try:
        code = _run(argv)
    except SpecError as e:
        print(f"specjax: error: {e}", file=sys.stderr)
        sys.exit(2)
    except ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            print(e.format_message())
            sys.exit(0)
        print(f"specjax: error: {_message(e)}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
