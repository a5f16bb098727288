"""Shared helpers for the sweep tests (subprocess runs, canonical row order)."""

import os
import subprocess
import sys

import polars as pl

from specjax.outputs import io


def canonical(out):
    df = io.read_results(out).collect()
    keys = ["hardware", "pair"] + [c for c in df.columns if c.endswith(("_seqs", "_tokens")) or c in
                                   ("alpha", "n_experts", "top_k", "expert_granularity", "hbm_bytes_per_s",
                                    "flops_per_s", "draft_cost_ratio", "tp_gpus")]
    return df.sort(keys).select(sorted(df.columns))


def specjax(*args, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "specjax", *args], capture_output=True, text=True, env=e,
                          timeout=timeout)


def assert_same(a, b):
    assert a.shape == b.shape
    assert a.equals(b, null_equal=True), (a, b)


__all__ = ["canonical", "specjax", "assert_same", "pl"]
