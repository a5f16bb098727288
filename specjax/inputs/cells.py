"""Checks of one CSV cell, shared by the measurement readers (`inputs.measured`, `inputs.steps`):
errors name the file, the line, the column, the value and what is allowed."""

import math
import pathlib

from .. import catalogue
from ..errors import SpecError


def err(path, line, col, value, allowed):
    return SpecError(f"{path} line {line}, column {col}: {value if value is not None else ''!r}; expected {allowed}")


def number(path, line, col, raw, allowed, ok, integer=False, optional=False):
    """A number cell checked by `ok` (None for an empty optional cell)."""
    if raw is None or raw.strip() == "":
        if optional:
            return None
        raise err(path, line, col, raw or "", allowed)
    try:
        v = float(raw)
    except ValueError:
        raise err(path, line, col, raw, allowed) from None
    if not math.isfinite(v) or not ok(v) or (integer and not v.is_integer()):
        raise err(path, line, col, raw, allowed)
    return int(v) if integer else v


def model_input(p, line, col, raw, optional=True):
    """A model-input column's number, checked against its catalogue row (the CSV's own range where it has
    one); None for an empty optional cell."""
    row = catalogue.CSV[col].csv_input
    return number(p, line, col, raw, ("empty or " if optional else "") + row.range_text(), row.ok,
                  integer=row.integer, optional=optional)


def known(value, slugs):
    """A preset slug or an existing file path."""
    return bool(value) and (value in slugs or pathlib.Path(value).is_file())
