"""Short summaries of a sweep output directory, read back through polars (lazy scans).

What is aggregated for a reduced sweep is declared by its `reductions.Reduction` record
(`summary`, `share_of`); a sweep without reduction is summarised per speedup curve.
"""

import json
import pathlib

import polars as pl

from .. import catalogue
from . import io
from ..search import reductions as _reductions


GRID_BELOW_1 = "first_grid_batch_below_1"  # a grid point, not the bisected crossing `crossover` reports
GRID_NOTE = (f"{GRID_BELOW_1}: the first batch of the sweep's grid with S < 1; the crossing itself lies between it "
             "and the grid point before (`specjax crossover` bisects it, or sweep with [reduce] kind = \"crossover\")")


def _reduction(out, cols):
    manifest = pathlib.Path(out) / "_manifest.json"
    if manifest.exists():
        try:
            return _reductions.get(json.loads(manifest.read_text())["reduce"])
        except (KeyError, ValueError, TypeError):
            pass
    return _reductions.get("crossover" if "crossover_batch" in cols else "none")


def summarize(out):
    """One row per (hardware, pair): what a reader wants first from the grid."""
    lf = io.read_results(out)
    cols = lf.collect_schema().names()
    keys = ["hardware", "pair"]
    aggs = [pl.len().alias("rows"), pl.col("valid").mean().alias("valid_share")]
    if "speedup" in cols and "batch_seqs" in cols:
        ordered = lf.sort(keys + ["batch_seqs"])
        inputs = [i.column for i in catalogue.AXES.values() if i.column in cols and i.column != "batch_seqs"]
        varying = [c for c in inputs if lf.select(pl.col(c).n_unique()).collect().item() > 1]
        aggs += [pl.col("speedup").max().alias("max_speedup"), (pl.col("speedup") < 1).mean().alias("share_below_1"),
                 pl.col("batch_seqs").filter(pl.col("valid")).max().alias("max_feasible_batch")]
        if not varying:  # one curve per (hardware, pair): where it crosses 1 on the grid
            aggs += [pl.col("speedup").first().alias("speedup_at_min_batch"),
                     pl.col("batch_seqs").filter(pl.col("speedup") < 1).first().alias(GRID_BELOW_1)]
        if "k_star" in cols:
            aggs += [pl.col("k_star").max().alias("k_star_max"), pl.col("k_star").min().alias("k_star_min")]
        return ordered.group_by(keys, maintain_order=True).agg(aggs).collect()
    red = _reduction(out, cols)
    for column, funcs in red.summary:
        if column in cols:
            aggs += [getattr(pl.col(column).cast(pl.Float64), f)().alias(f"{column}_{f}") for f in funcs]
    aggs += [(pl.col("status") == s.label).mean().alias(f"share_{s.label}") for s in red.share_of]
    return lf.group_by(keys).agg(aggs).sort(keys).collect()
