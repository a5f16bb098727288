"""Crossover batch B*: the smallest real B >= 1 with S(B) < 1 (MODEL.md section 3).

S need not be monotone in B (MoE: rises then falls; long context: can rise again), so S is
bracketed on a log grid of B in [1, batch_max] and the first sign change refined by bisection
in log B. Pure and vmappable; `lax.fori_loop` for the bisection.
Statuses (`status.Curve`): crosses, never_helps (S(1) < 1), helps_throughout (no crossing up to batch_max).
Because S can dip below 1 and recover (an MoE target verifying k+1 tokens per sequence touches more
experts at small batch), `pays_again_batch` reports where S climbs back to 1 after B*, if it does.
"""

from typing import NamedTuple

import jax.numpy as jnp

from ..cost._search import first_crossing
from ..cost.precision import float_dtype
from ..cost.speculative import step
from ..cost.status import Curve, code


class Crossover(NamedTuple):
    """B* (NaN unless status is crosses), its ceiling, status code, S(1), memory context."""

    crossover_batch: float
    crossover_batch_int: float
    status: int            # a `status.Curve` code (int8)
    speedup_at_batch_1: float
    max_batch_sd: float
    beyond_memory: float   # 1.0 if B* exceeds the memory-feasible batch with the drafter
    speedup_at_max_batch: float  # S at the largest batch that fits with the drafter (NaN if none fits)
    pays_again_batch: float  # first batch above B* where S >= 1 again (NaN if none up to batch_max)


def speedup_at(hw, deploy, target, draft, dec, batch):
    """S at a (real) batch, other inputs as in `dec`."""
    return step(hw, deploy, target, draft, dec.replace(batch=batch)).speedup


def find(hw, deploy, target, draft, dec, batch_max=65536.0, n_grid=96, n_bisect=40):
    """Locate the crossover batch. `dec.batch` is ignored.

    Args:
      hw, deploy, target, draft, dec: as in `speculative.step`.
      batch_max: upper end of the search (sequences). n_grid: log-grid points (static).
      n_bisect: bisection steps in log B (static).

    Returns:
      `Crossover`.
    """
    dtype = float_dtype(dec.alpha)
    b_star, r, crosses, b_back, pays_again = first_crossing(
        lambda res: res.speedup < 1.0, lambda b: step(hw, deploy, target, draft, dec.replace(batch=b)),
        batch_max, n_grid, n_bisect, dtype)
    s1, mb_sd = r.speedup[0], r.max_batch_sd[0]
    status = jnp.where(s1 < 1.0, code(Curve.NEVER_HELPS),
                       jnp.where(crosses, code(Curve.CROSSES), code(Curve.HELPS_THROUGHOUT)))
    is_cross = status == code(Curve.CROSSES)
    b_star = jnp.where(is_cross, b_star, jnp.nan)
    b_fit = jnp.clip(jnp.minimum(mb_sd, batch_max), 1.0, None)
    s_fit = jnp.where(mb_sd >= 1, speedup_at(hw, deploy, target, draft, dec, b_fit), jnp.nan)
    return Crossover(crossover_batch=b_star, crossover_batch_int=jnp.ceil(b_star), status=status,
                     speedup_at_batch_1=s1, max_batch_sd=mb_sd,
                     beyond_memory=(is_cross & (b_star > mb_sd)).astype(dtype), speedup_at_max_batch=s_fit,
                     pays_again_batch=jnp.where((status != code(Curve.HELPS_THROUGHOUT)) & pays_again, b_back, jnp.nan))
