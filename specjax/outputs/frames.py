"""Kernel outputs -> polars DataFrames: numeric inputs first (catalogue order), then outputs, then
`valid` and `status` (a polars Enum of the reduction's status names). Neither NaN nor infinity reaches a
file: a missing number (an unsustainable rate's TTFT) is null and its row carries a status."""

import numpy as np
import polars as pl

from .. import catalogue
from .finite import finite_frame


def status_enum(status_type):
    """The polars Enum dtype of a `status` type's names."""
    return pl.Enum(list(status_type.names()))


def sweep_frame(spec, arrays, n):
    """The first `n` rows of one chunk's output arrays as a DataFrame."""
    cols = {name: np.asarray(a)[:n] for name, a in arrays.items() if name != "status_code"}
    status_type = spec.reduction.status_type
    df = pl.DataFrame(cols)
    df = finite_frame(df)  # NaN and infinities -> null: the row's status says why (`outputs.finite`)
    df = df.with_columns(pl.Series("status", status_type.decode(np.asarray(arrays["status_code"])[:n]),
                                   dtype=status_enum(status_type)))
    real = next(df[c].dtype for c in df.columns if df[c].dtype in (pl.Float32, pl.Float64))
    for key, v in spec.fixed.items():  # a fixed number is a column too (names, dtypes and vectors have none)
        column = catalogue.INPUTS[key].column
        if column and column not in df.columns:
            df = df.with_columns(pl.lit(float(v), real).alias(column))
    inputs = [i.column for i in catalogue.INPUTS.values() if i.column in df.columns]
    rest = [c for c in df.columns if c not in inputs and c not in ("valid", "status")]
    return df.select(inputs + rest + ["valid", "status"])
