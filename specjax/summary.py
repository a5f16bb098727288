"""Short summaries of a sweep output directory, read back through polars (lazy scans)."""

import polars as pl

from . import io
from .axes import NUMERIC, column


def summarize(out):
    """One row per (hardware, pair): what a reader wants first from the grid."""
    lf = io.read_results(out)
    cols = lf.collect_schema().names()
    keys = ["hardware", "pair"]
    aggs = [pl.len().alias("rows"), pl.col("valid").mean().alias("valid_share")]
    if "speedup" in cols and "batch_seqs" in cols:
        ordered = lf.sort(keys + ["batch_seqs"])
        inputs = [column(n) for n in NUMERIC if column(n) in cols and column(n) != "batch_seqs"]
        varying = [c for c in inputs if lf.select(pl.col(c).n_unique()).collect().item() > 1]
        aggs += [pl.col("speedup").max().alias("max_speedup"), (pl.col("speedup") < 1).mean().alias("share_below_1"),
                 pl.col("batch_seqs").filter(pl.col("valid")).max().alias("max_feasible_batch")]
        if not varying:  # one curve per (hardware, pair): where it crosses 1 on the grid
            aggs += [pl.col("speedup").first().alias("speedup_at_min_batch"),
                     pl.col("batch_seqs").filter(pl.col("speedup") < 1).first().alias("first_batch_below_1")]
        if "k_star" in cols:
            aggs += [pl.col("k_star").max().alias("k_star_max"), pl.col("k_star").min().alias("k_star_min")]
        return ordered.group_by(keys, maintain_order=True).agg(aggs).collect()
    if "crossover_batch" in cols:
        aggs += [pl.col("crossover_batch").min().alias("crossover_min"),
                 pl.col("crossover_batch").median().alias("crossover_median"),
                 pl.col("crossover_batch").max().alias("crossover_max"),
                 (pl.col("status") == "crosses").mean().alias("share_crosses"),
                 (pl.col("status") == "never_helps").mean().alias("share_never_helps"),
                 (pl.col("status") == "helps_throughout").mean().alias("share_helps_throughout"),
                 pl.col("beyond_memory").mean().alias("share_beyond_memory"),
                 pl.col("speedup_at_max_batch").median().alias("median_speedup_at_max_batch")]
    for c in ("max_speedup", "speedup_k_star"):
        if c in cols:
            aggs += [pl.col(c).min().alias(f"{c}_min"), pl.col(c).max().alias(f"{c}_max")]
    return lf.group_by(keys).agg(aggs).sort(keys).collect()
