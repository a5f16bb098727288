"""The one non-finite policy of every writer: JSON (printed or written), Parquet and CSV carry no NaN and no
infinity. A number the model cannot give (an unsustainable request rate's TTFT, a metric over no rows) is
null, and its row's `status` (or a `reason` beside it) says why: `sd_saturated`, `both_saturated`,
`model_does_not_fit`, ... (`cost.status`). Every writer calls this module (`outputs.io`, `cli.app.print_json`,
`api`), so none can differ."""

import json
import math

import numpy as np


def finite(obj):
    """`obj` with every NaN or infinite float (Python or numpy) replaced by None, recursively through dicts,
    lists and tuples (tuples become lists, as JSON has them)."""
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def json_text(obj, **kw):
    """JSON of `obj` under the policy: non-finite numbers as null; `json.dumps` refuses any that slipped by."""
    return json.dumps(finite(obj), allow_nan=False, **kw)


def finite_frame(df):
    """A polars DataFrame with every NaN or infinite float cell null (its row's status says why)."""
    import polars as pl

    floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
    if not floats:
        return df
    return df.with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c) for c in floats)
