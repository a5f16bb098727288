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
