"""Crossover batch B*: the smallest real B >= 1 with S(B) < 1 (MODEL.md section 3).

S need not be monotone in B (MoE: rises then falls; long context: can rise again), so S is
bracketed on a log grid of B in [1, batch_max] and the first sign change refined by bisection
in log B. Pure and vmappable; `lax.fori_loop` for the bisection.
Status codes: 0 crosses, 1 never_helps (S(1) < 1), 2 helps_throughout (no crossing up to batch_max).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .speculative import step

STATUS = {0: "crosses", 1: "never_helps", 2: "helps_throughout"}


class Crossover(NamedTuple):
    """B* (NaN unless status is crosses), its ceiling, status code, S(1), memory context."""

    crossover_batch: float
    crossover_batch_int: float
    status: float
    speedup_at_batch_1: float
    max_batch_sd: float
    beyond_memory: float   # 1.0 if B* exceeds the memory-feasible batch with the drafter
    speedup_at_max_batch: float  # S at the largest batch that fits with the drafter (NaN if none fits)


def speedup_at(hw, target, draft, dec, batch, mode):
    """S at a (real) batch, other inputs as in `dec`."""
    return step(hw, target, draft, dec.replace(batch=batch), mode).speedup


def find(hw, target, draft, dec, mode="operator", batch_max=65536.0, n_grid=96, n_bisect=40):
    """Locate the crossover batch. `dec.batch` is ignored.

    Args:
      hw, target, draft, dec: as in `speculative.step`. mode: roofline mode (static).
      batch_max: upper end of the search (sequences). n_grid: log-grid points (static).
      n_bisect: bisection steps in log B (static).

    Returns:
      `Crossover`.
    """
    dtype = jnp.result_type(dec.alpha, jnp.float32)
    log_max = jnp.log(jnp.asarray(batch_max, dtype))
    grid = jnp.exp(jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * log_max)
    s = jax.vmap(lambda b: speedup_at(hw, target, draft, dec, b, mode))(grid)
    below = s < 1.0
    first = jnp.argmax(below)
    lo0 = jnp.log(grid[jnp.maximum(first - 1, 0)])
    hi0 = jnp.log(grid[first])

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        mid_below = speedup_at(hw, target, draft, dec, jnp.exp(mid), mode) < 1.0
        return jnp.where(mid_below, lo, mid), jnp.where(mid_below, mid, hi)

    lo, hi = jax.lax.fori_loop(0, n_bisect, body, (lo0, hi0))
    b_star = jnp.exp(0.5 * (lo + hi))
    status = jnp.where(s[0] < 1.0, 1.0, jnp.where(jnp.any(below), 0.0, 2.0))
    b_star = jnp.where(status == 0.0, b_star, jnp.nan)
    mb_sd = step(hw, target, draft, dec.replace(batch=jnp.ones((), dtype)), mode).max_batch_sd
    b_fit = jnp.clip(jnp.minimum(mb_sd, batch_max), 1.0, None)
    s_fit = jnp.where(mb_sd >= 1, speedup_at(hw, target, draft, dec, b_fit, mode), jnp.nan)
    return Crossover(crossover_batch=b_star, crossover_batch_int=jnp.ceil(b_star), status=status,
                     speedup_at_batch_1=s[0], max_batch_sd=mb_sd,
                     beyond_memory=((status == 0.0) & (b_star > mb_sd)).astype(dtype), speedup_at_max_batch=s_fit)
