"""Jitted entry points for single operating points (the CLI and notebooks call these).

The kernels in `speculative`, `crossover`, `sensitivity` and `optimize` are pure functions of
one point taking (hw, deploy, target, draft, dec); this module applies `jax.jit` once per entry
point and converts results to plain Python dicts (NaN -> None, statuses -> names) for printing
and JSON.
"""

import functools
import math

import jax
import numpy as np

from .search import crossover as _crossover
from .search import optimize as _optimize
from .search import sensitivity as _sensitivity
from .cost.speculative import step
from .cost.status import Curve, Point


def finite_or_none(x):
    """A Python float, or None where it is NaN or infinite (JSON has neither)."""
    f = float(np.asarray(x))
    return f if math.isfinite(f) else None


def _int_or_none(x):
    return None if x is None else int(x)


def to_python(named_tuple):
    """NamedTuple of 0-d arrays -> dict of Python floats (NaN and inf -> None)."""
    return {k: finite_or_none(v) for k, v in named_tuple._asdict().items()}


_step = jax.jit(step)


@functools.partial(jax.jit, static_argnames=("n_grid",))
def _find(hw, deploy, target, draft, dec, batch_max, n_grid=96):
    return _crossover.find(hw, deploy, target, draft, dec, batch_max, n_grid)


def point(scenario, dtype=None):
    """Evaluate one `Scenario`; returns a dict with the `Result` fields plus labels."""
    r = to_python(_step(*scenario.build(*(dtype,) if dtype else ())))
    r["bound"] = "compute" if r.pop("verify_compute_bound") else "memory"
    r["status"] = Point.decode(int(r["status"]))
    r["feasible"] = bool(r["feasible"])
    for key in ("max_batch_base", "max_batch_sd"):
        r[key] = _int_or_none(r[key])
    return r


def crossover(scenario, batch_max=65536.0, dtype=None):
    """Crossover batch of a `Scenario` (its batch is ignored); returns a dict."""
    return _crossover_dict(_find(*scenario.build(*(dtype,) if dtype else ()), batch_max))


def _crossover_dict(found):
    c = to_python(found)
    c["status"] = Curve.decode(int(c["status"]))
    c["beyond_memory"] = bool(c["beyond_memory"])
    for key in ("crossover_batch_int", "max_batch_sd"):
        c[key] = _int_or_none(c[key])
    return c


_sens = jax.jit(_sensitivity.crossover_sensitivity)


def sensitivity(scenario, batch_max=65536.0, dtype=None):
    """Crossover batch and its elasticities / derivatives for every continuous input."""
    c, deriv, elast = _sens(*scenario.build(*(dtype,) if dtype else ()), batch_max)
    out = _crossover_dict(c)
    clean = lambda d: {k: finite_or_none(v) for k, v in d.items()}  # noqa: E731
    out["elasticities"] = dict(sorted(clean(elast).items(), key=lambda kv: -abs(kv[1] or 0.0)))
    out["derivatives"] = clean(deriv)
    return out


@functools.partial(jax.jit, static_argnames=("k_max", "method"))
def _opt(hw, deploy, target, draft, dec, batches, batch_max, k_max, method):
    trees = (hw, deploy, target, draft)
    per = jax.vmap(lambda b: _optimize.best_k(*trees, dec.replace(batch=b), k_max, method))(batches)
    off = _optimize.switch_off_batch(*trees, dec, k_max, batch_max)
    return per, off


def optimize(scenario, batches, k_max=16, batch_max=65536.0, dtype=None, method="optax"):
    """k* (optax search, integer-checked) at each batch, and the switch-off batch."""
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    b = np.asarray(batches, dtype=np.asarray(dec.alpha).dtype)
    per, off = _opt(hw, deploy, tgt, draft, dec, b, batch_max, int(k_max), method)
    rows = [dict(batch=float(bi), k_star=int(per.k_star[i]), speedup=float(per.speedup[i]),
                 k_relaxed=finite_or_none(per.k_relaxed[i])) for i, bi in enumerate(b)]
    off = float(off)
    return dict(k_star_by_batch=rows, switch_off_batch=off if math.isfinite(off) else None)
