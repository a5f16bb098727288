"""Jitted entry points for single operating points (the CLI and notebooks call these).

The kernels in `speculative`, `crossover`, `sensitivity` and `optimize` are pure functions of
one point; this module applies `jax.jit` once per entry point and converts results to plain
Python dicts (NaN -> None) for printing and JSON.
"""

import functools
import math

import jax
import numpy as np

from . import crossover as _crossover
from .speculative import STATUS, step


def to_python(named_tuple):
    """NamedTuple of 0-d arrays -> dict of Python floats (NaN and inf -> None)."""
    out = {}
    for k, v in named_tuple._asdict().items():
        f = float(np.asarray(v))
        out[k] = f if math.isfinite(f) else None
    return out


@functools.partial(jax.jit, static_argnames=("mode",))
def _step(hw, target, draft, dec, mode):
    return step(hw, target, draft, dec, mode)


@functools.partial(jax.jit, static_argnames=("mode", "n_grid"))
def _find(hw, target, draft, dec, batch_max, mode, n_grid=96):
    return _crossover.find(hw, target, draft, dec, mode, batch_max, n_grid)


def point(scenario, dtype=None):
    """Evaluate one `Scenario`; returns a dict with the `Result` fields plus labels."""
    hw, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    r = to_python(_step(hw, tgt, draft, dec, scenario.roofline))
    r["bound"] = "compute" if r.pop("verify_compute_bound") else "memory"
    r["status"] = STATUS[int(r["status"])]
    r["feasible"] = bool(r["feasible"])
    for key in ("max_batch_base", "max_batch_sd"):
        r[key] = None if r[key] is None else int(r[key])
    return r


def crossover(scenario, batch_max=65536.0, dtype=None):
    """Crossover batch of a `Scenario` (its batch is ignored); returns a dict."""
    hw, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    c = to_python(_find(hw, tgt, draft, dec, batch_max, scenario.roofline))
    c["status"] = _crossover.STATUS[int(c["status"])]
    c["beyond_memory"] = bool(c["beyond_memory"])
    c["crossover_batch_int"] = None if c["crossover_batch_int"] is None else int(c["crossover_batch_int"])
    c["max_batch_sd"] = None if c["max_batch_sd"] is None else int(c["max_batch_sd"])
    return c
