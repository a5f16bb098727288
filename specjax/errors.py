"""The one exception type for bad input: names the source, field, value and allowed range."""

import difflib


class SpecError(ValueError):
    """Invalid user input (CLI flag, spec file, config, CSV). Message is one line."""


class NotDifferentiable(SpecError):
    """A gradient taken through a search (crossover, k*): its answer is located by comparisons, so the
    chain rule through it would be a silent zero. Message is one line and names what to use instead."""


def field_error(field, value, allowed, source=None):
    """Build a `SpecError` naming `field`, its `value` and what is `allowed`."""
    where = f" in {source}" if source else ""
    return SpecError(f"{field}={value!r}{where}; expected {allowed}")


def unknown_name(kind, name, known, source=None):
    """Build a `SpecError` for an unknown preset or key, listing close matches."""
    close = difflib.get_close_matches(str(name), list(known), n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    where = f" in {source}" if source else ""
    return SpecError(f"unknown {kind} {name!r}{where}{hint}")


def path_exists(path):
    """`Path.exists()`, False for a name the file system cannot even look up (too long, ...): such a
    name is not a file, so the caller treats it as a preset name and reports it as unknown."""
    import pathlib

    try:
        return pathlib.Path(path).exists()
    except (OSError, ValueError):
        return False


def read_text(path, kind, max_bytes=1 << 20):
    """Read a UTF-8 text file of at most `max_bytes`, or raise a one-line `SpecError` naming it."""
    import pathlib

    p = pathlib.Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise SpecError(f"{kind} {str(p)!r} is {size:,} bytes; expected at most {max_bytes:,}")
        with open(p, "rb") as f:  # bounded read: a device or pipe (/dev/zero) reports size 0 and never ends
            raw = f.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise SpecError(f"{kind} {str(p)!r} is more than {max_bytes:,} bytes; expected at most {max_bytes:,}")
    except FileNotFoundError:
        raise SpecError(f"{kind} {str(p)!r} not found") from None
    except IsADirectoryError:
        raise SpecError(f"{kind} {str(p)!r} is a directory; expected a file") from None
    except OSError as e:
        raise SpecError(f"cannot read {kind} {str(p)!r}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{kind} {str(p)!r} is not UTF-8 text (invalid byte at offset {e.start})") from None


MAX_DIGITS = 300  # an integer longer than this is no count or size (float64 ends near 1.8e308)


def _bounded(obj, source):
    """`obj` (parsed JSON or TOML), refused where an integer has more than `MAX_DIGITS` digits (its float
    would be infinite, and Python refuses to print one over 4,300). Walked without recursion."""
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 997:  # 2^997 ~ 1.3e300
            raise SpecError(f"{source}: an integer of more than {MAX_DIGITS} digits; expected a count or size")
    return obj


def _parse_failure(e, source, fmt):
    """The one line for a parser's failure that is not a syntax error: a 5,000-digit integer (Python's
    int-from-text limit), 100,000 nested arrays (the recursion limit)."""
    if isinstance(e, RecursionError):
        return SpecError(f"{source}: {fmt} nested too deep (lists or tables inside one another beyond "
                         "Python's recursion limit)")
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "digits" in text:
        return SpecError(f"{source}: an integer of more than {MAX_DIGITS} digits; expected a count or size")
    return SpecError(f"{source}: malformed {fmt} ({text[:120]})")


def parse_json(text, source):
    """The value of JSON `text` read from `source` (e.g. "model config 'x.json'"), every failure a
    one-line `SpecError` naming it: a syntax error with its line and column, a number with thousands of
    digits, nesting deeper than the recursion limit, NaN or Infinity (not JSON)."""
    import json

    def constant(name):
        raise SpecError(f"{source}: {name} is not a JSON number; expected a finite number")

    def integer(digits):
        if len(digits.lstrip("-")) > MAX_DIGITS:
            raise SpecError(f"{source}: an integer of {len(digits.lstrip('-')):,} digits; expected a count or size")
        return int(digits)

    try:
        return json.loads(text, parse_constant=constant, parse_int=integer)
    except json.JSONDecodeError as e:
        raise SpecError(f"cannot read {source}: malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        if isinstance(e, SpecError):
            raise
        raise _parse_failure(e, source, "JSON") from None


def parse_toml(text, source):
    """The table of TOML `text` read from `source`, every failure a one-line `SpecError` naming it (a
    syntax error, a number with thousands of digits, nesting deeper than the recursion limit)."""
    import tomllib

    try:
        return _bounded(tomllib.loads(text), source)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"cannot read {source}: malformed TOML: {str(e).splitlines()[0]}") from None
    except (ValueError, RecursionError) as e:
        if isinstance(e, SpecError):
            raise
        raise _parse_failure(e, source, "TOML") from None
