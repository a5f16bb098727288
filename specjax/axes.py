"""Numeric inputs a sweep can vary: where each lands in the kernel pytrees, its column name
(with units) and its allowed range. One table, read by spec validation, grid building and output.
"""

import math

# name -> (pytree, field, column name in result grids, (lo, hi), description of range)
NUMERIC = {
    "batch": ("dec", "batch", "batch_seqs", (1, 1e8)),
    "k": ("dec", "k", "k_tokens", (0, 64)),
    "alpha": ("dec", "alpha", "alpha", (0, 1)),
    "accepted_length": ("dec", None, "accepted_length_tokens", (1, 65)),
    "context": ("dec", "context", "context_tokens", (0, 1e8)),
    "tp": ("dec", "tp", "tp_gpus", (1, 4096)),
    "draft_cost": ("dec", "draft_cost_ratio", "draft_cost_ratio", (0, 10)),
    "memory_fraction": ("dec", "memory_fraction", "memory_fraction", (1e-6, 1)),
    "flops_per_s": ("hw", "flops_per_s", "flops_per_s", (1e6, 1e20)),
    "hbm_bytes_per_s": ("hw", "hbm_bytes_per_s", "hbm_bytes_per_s", (1e3, 1e16)),
    "hbm_bytes": ("hw", "hbm_bytes", "hbm_bytes", (1e3, 1e16)),
    "link_bytes_per_s": ("hw", "link_bytes_per_s", "link_bytes_per_s", (1e3, 1e16)),
    "link_latency_s": ("hw", "link_latency_s", "link_latency_s", (0, 1)),
    "flops_efficiency": ("hw", "flops_efficiency", "flops_efficiency", (1e-6, 1)),
    "hbm_efficiency": ("hw", "hbm_efficiency", "hbm_efficiency", (1e-6, 1)),
    "fixed_overhead_s": ("hw", "fixed_overhead_s", "fixed_overhead_s", (0, 1)),
    "expert_locality": ("hw", "expert_locality", "expert_locality", (0, 1)),
    "non_overlap": ("hw", "non_overlap", "non_overlap", (0, 1)),
    "n_experts": ("target", "n_experts", "n_experts", (1, 1e6)),
    "top_k": ("target", "top_k", "top_k", (1, 1e6)),
    "expert_granularity": ("target", None, "expert_granularity", (1e-6, 1e6)),
    "window": ("target", "window", "window_tokens", (1, 1e9)),
}

EXPERT_HOLD = ("expert_size", "footprint")


def column(name):
    """Result-grid column of a numeric input (units in the name)."""
    return NUMERIC[name][2]


def in_range(name, value):
    lo, hi = NUMERIC[name][3]
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return is_number and math.isfinite(value) and lo <= value <= hi


def range_text(name):
    lo, hi = NUMERIC[name][3]
    return f"a number in [{lo:g}, {hi:g}]"
