"""The one exception type for bad input: names the source, field, value and allowed range."""

import difflib


class SpecError(ValueError):
    """Invalid user input (CLI flag, spec file, config, CSV). Message is one line."""


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
