"""Vmappable one-dimensional searches shared by the kernels (fixed iteration counts, no Python
control flow on traced values, so they jit and vmap).

`bisect` finds where a monotone predicate flips between two bounds; `first_crossing` brackets the
first flip on a log grid (the function need not be monotone) and then bisects in log space.
"""

import jax
import jax.numpy as jnp


def bisect(is_low, lo, hi, iters):
    """Shrink [lo, hi] around the point where `is_low(x)` turns False (True below it, False above).

    Returns the midpoint of the final bracket. `iters` halvings (static); 64 reach float64 resolution.
    """
    def body(_, bounds):
        a, b = bounds
        mid = 0.5 * (a + b)
        low = is_low(mid)
        return jnp.where(low, mid, a), jnp.where(low, b, mid)

    a, b = jax.lax.fori_loop(0, iters, body, (lo, hi))
    return 0.5 * (a + b)


def first_crossing(is_past, values, x_max, n_grid, n_bisect, dtype):
    """Smallest x in [1, x_max] with `is_past(value)` True, x on a log grid then bisected in log x;
    and where, after that, the predicate first turns False again (non-monotone curves).

    Args:
      is_past: predicate on the outputs of `values` (e.g. speedup < 1).
      values: x -> outputs (vmappable); evaluated on the whole grid once.
      x_max: upper end of the search. n_grid, n_bisect: static sizes.

    Returns:
      (x_star, grid_outputs, any_past, x_back, any_back): x_star is the first crossing (1 if the first
      grid point is already past; meaningless if nothing is past); x_back the first x > x_star where
      the predicate is False again (meaningless unless any_back).
    """
    grid = jnp.exp(jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * jnp.log(jnp.asarray(x_max, dtype)))
    outs = jax.vmap(values)(grid)
    past = is_past(outs)
    first = jnp.argmax(past)
    not_past_at = lambda lx: ~is_past(values(jnp.exp(lx)))  # noqa: E731
    log_x = bisect(not_past_at, jnp.log(grid[jnp.maximum(first - 1, 0)]), jnp.log(grid[first]), n_bisect)
    x_star = jnp.where(past[0], grid[0], jnp.exp(log_x))
    back = ~past & (jnp.arange(n_grid) > first) & jnp.any(past)
    again = jnp.argmax(back)
    log_back = bisect(lambda lx: is_past(values(jnp.exp(lx))), jnp.log(grid[jnp.maximum(again - 1, 0)]),
                      jnp.log(grid[again]), n_bisect)
    return x_star, outs, jnp.any(past), jnp.exp(log_back), jnp.any(back)
