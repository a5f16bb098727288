"""Per-request accepted lengths: the table `specjax ingest` writes from per-request engine output
(`vllm-requests`, `sglang-requests`: columns request_id, accepted_length, k, verify_steps, output_tokens,
...), read as samples of the spread of acceptance over requests (`serve --acceptance-samples`,
docs/model.md §10.1).

Only `accepted_length` is required (one row per request, each in [1, 65]); `k`, where a row gives it, must
be one draft length for the whole file, and the scenario's k must be it. The batch's tokens per step is
the samples' harmonic mean 1 / mean(1 / tau_i) (each request spends L_out / tau_i steps in the batch),
which replaces the scenario's acceptance.
"""

import dataclasses
import math
import pathlib

from .. import catalogue
from ..errors import SpecError, field_error, read_text

MAX_BYTES = 256 << 20  # a table of a few million requests
FIELD = "acceptance_samples"


@dataclasses.dataclass(frozen=True)
class Samples:
    """Per-request accepted lengths (tokens per step, bonus included) and the draft length they were
    measured at (None where no row says)."""

    taus: tuple
    k: int | None = None
    source: str | None = None

    @property
    def harmonic_mean(self):
        """1 / mean(1 / tau_i): the tokens per step of a batch of these requests."""
        return len(self.taus) / math.fsum(1.0 / t for t in self.taus)

    @property
    def mean(self):
        return math.fsum(self.taus) / len(self.taus)

    def check_k(self, k):
        """The scenario's draft length `k` is the samples' and admits every sample (tau_i <= k + 1)."""
        where = f" in {self.source}" if self.source else ""
        if self.k is not None and k != self.k:
            raise field_error("k", k, f"{self.k}, the draft length of the samples{where} (give --k {self.k})")
        top = max(self.taus)
        if top > k + 1:
            raise field_error(FIELD, self.source or "samples", f"accepted lengths <= k + 1 = {k + 1:g}; a sample is "
                              f"{top:g} (give the k they were measured at)")


def from_values(taus, k=None, source=None):
    """`Samples` from accepted lengths, each checked against the catalogue's accepted_length range."""
    row = catalogue.INPUTS["accepted_length"]
    taus = list(taus)
    if not taus:
        raise field_error(FIELD, source or "[]", "at least one request's accepted_length")
    out = tuple(row.check(t, source, f"accepted_length[{i}]") for i, t in enumerate(taus))
    if k is not None:
        k = int(catalogue.INPUTS["k"].csv_input.check(k, source, "k"))
    return Samples(out, k, source)


def load(path):
    """Read `Samples` from a .csv (or .parquet) table with an `accepted_length` column (and optionally `k`);
    every bad cell is a one-line error naming the file, row and value."""
    import polars as pl

    p = pathlib.Path(path)
    if p.suffix == ".parquet":
        if not p.is_file():
            raise SpecError(f"{FIELD} {str(p)!r} not found")
        try:
            df = pl.read_parquet(p).cast(pl.String)
        except Exception as e:  # polars raises several types for a damaged file
            raise SpecError(f"cannot read {FIELD} {str(p)!r}: {str(e).splitlines()[0]}") from None
    else:
        text = read_text(p, FIELD, MAX_BYTES)
        try:
            df = pl.read_csv(text.encode(), infer_schema=False, truncate_ragged_lines=False)
        except Exception as e:  # polars raises several types for malformed CSV
            raise SpecError(f"malformed CSV {str(p)!r}: {str(e).splitlines()[0]}") from None
    if "accepted_length" not in df.columns:
        raise SpecError(f"{p}: no accepted_length column; expected the per-request table of specjax ingest "
                        "(--format vllm-requests or sglang-requests)")
    taus, ks = [], set()
    col_k = df["k"].to_list() if "k" in df.columns else [None] * df.height
    for i, (t, k) in enumerate(zip(df["accepted_length"].to_list(), col_k)):
        line = f"{p} row {i + 2}"  # row 1 is the header
        taus.append(catalogue.INPUTS["accepted_length"].check(_number(t, "accepted_length", line), line))
        if k not in (None, ""):
            ks.add(int(catalogue.INPUTS["k"].csv_input.check(_number(k, "k", line), line, "k")))
    if len(ks) > 1:
        raise field_error("k", sorted(ks), f"one draft length per file of samples ({p})")
    return from_values(taus, ks.pop() if ks else None, str(p))


def _number(cell, field, where):
    try:
        return float(cell)
    except (TypeError, ValueError):
        raise field_error(field, cell, "a number", where) from None
