"""Checks of one CSV cell, shared by the measurement readers (`inputs.measured`, `inputs.steps`):
errors name the file, the line, the column, the value and what is allowed."""

import dataclasses
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


def check_buildable(rows):
    """Mark rows whose configuration the model cannot build (a layout it does not divide by, a drafter that
    does not fit its target) unsupported, with the reason; rows sharing a `build_key` are checked once."""
    cache, out = {}, []
    for r in rows:
        if r.unsupported is None:
            if r.build_key not in cache:
                try:
                    r.scenario().check()
                    cache[r.build_key] = None
                except SpecError as e:
                    cache[r.build_key] = str(e)
            if cache[r.build_key]:
                r = dataclasses.replace(r, unsupported=cache[r.build_key])
        out.append(r)
    return out


LOADS = ("concurrency", "qps", "batch")  # the load a measured row was taken under: exactly one per row


def known(value, slugs):
    """A preset slug or an existing file path."""
    return bool(value) and (value in slugs or pathlib.Path(value).is_file())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured:
    """What every measured row carries, speedup (`measured.Row`) or plain step time (`steps.StepRow`):
    where it is in its file and where it comes from, the target on its hardware and layout, and the
    engine it ran under."""

    line: int
    series: str
    target: str
    hardware: str
    tp: int
    weight_dtype: str
    source_url: str
    engine: str = ""
    ep: int = 1
    dp_attention: int = 1
    kv_dtype: str | None = None
    expert_dtype: str | None = None  # routed experts' weight dtype where it differs from weight_dtype (gpt-oss: mxfp4)
    compute_dtype: str = catalogue.INPUTS["compute_dtype"].default  # the dtype whose peak FLOP/s the GEMMs ran at
    concurrency: int | None = None
    qps: float | None = None
    dataset: str = ""
    unsupported: str | None = None

    @property
    def load_kind(self):
        """"concurrency", "qps" or "batch" (`LOADS`): the load the row was measured under (every subclass
        has a `batch`; a speedup row at a rate or a concurrency carries batch 1, so the order decides)."""
        return next(n for n in LOADS if getattr(self, n) is not None)

    @property
    def load_value(self):
        """The number of the row's load: its concurrency, request rate or batch."""
        return getattr(self, self.load_kind)

    @property
    def source(self):
        """Short label of where the row comes from (the URL without its scheme)."""
        return self.source_url.split("://", 1)[-1].removeprefix("www.")

    @property
    def engine_name(self):
        """The engine profile this row is predicted with by default (its column, or the default engine)."""
        return self.engine or catalogue.INPUTS["engine"].default


def dtype(p, line, col, value):
    """A row's optional storage-dtype cell (`kv_dtype`, `expert_dtype`): None when empty, else its canonical name
    (`inputs.dtypes.canonical`) after checking it is a known dtype; `expert_dtype` is the routed experts' dtype where
    a checkpoint quantises only them (gpt-oss: MXFP4 experts beside BF16 attention, embeddings and LM head)."""
    from .dtypes import BYTES_PER_ELEMENT, canonical

    v = (value or "").strip()
    if not v:
        return None
    if v not in BYTES_PER_ELEMENT:
        raise err(p, line, col, v, f"empty or one of {', '.join(BYTES_PER_ELEMENT)}")
    return canonical(v)


def compute_dtype(p, line, value):
    """A row's optional `compute_dtype` cell: the catalogue's default (bf16) when empty, else one of its choices
    (the dtype the engine's matrix multiplies ran in: fp8 for W8A8 FP8 models, fp4 for NVFP4/MXFP4 W4A4)."""
    row = catalogue.INPUTS["compute_dtype"]
    v = (value or "").strip()
    if not v:
        return row.default
    allowed = row.choices
    if v not in allowed:
        raise err(p, line, "compute_dtype", v, f"empty or one of {', '.join(allowed)}")
    return v
