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


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"specjax: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _profile_lines(started):
    """The `--profile` lines of this run (printed on stderr after whatever the command printed, and after
    its error line: the error comes first)."""
    from .. import IMPORT_STARTED
    from .app import PROFILE

    lines = []
    for p in PROFILE:
        p.start, p.imported_s = IMPORT_STARTED, started - IMPORT_STARTED
        lines += p.lines()
    return lines


def _outcome(argv):
    """(exit code, the error line or None, whether to print the usage text on stdout) of running the app."""
    try:
        code = app(args=argv, standalone_mode=False, prog_name="specjax")
    except SpecError as e:
        return 2, f"specjax: error: {e}", None
    except ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            return 0, None, e.format_message()
        return 2, f"specjax: error: {_message(e)}", None
    except typer.Abort:
        return 130, None, None
    return (code if isinstance(code, int) else 0), None, None


def main(argv=None):
    """Console entry point: runs the app, turning bad input into one line on stderr and exit 2; the
    `--profile` lines follow that line."""
    from .app import PROFILE

    argv = sys.argv[1:] if argv is None else list(argv)
    # NaN and overflow are reported as statuses and nulls, never as warnings: stderr stays one line
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.showwarning = _one_line_warning  # e.g. a compilation-cache entry JAX cannot read: one line, go on
    started = time.perf_counter()
    PROFILE.clear()
    code, error, usage = _outcome(argv)
    if usage is not None:
        print(usage)
    if error is not None:
        print(error, file=sys.stderr)
    lines = _profile_lines(started)
    if lines:
        print("\n".join(lines), file=sys.stderr)
    sys.exit(code)
