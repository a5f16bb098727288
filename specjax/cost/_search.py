"""Vmappable one-dimensional searches shared by the kernels (fixed iteration counts, no Python
control flow on traced values, so they jit and vmap).

`bisect` finds where a monotone predicate flips between two bounds. `sign_changes` finds every place
where a smooth-or-kinked function g(x) on [1, x_max] changes sign (MODEL.md 3): g is sampled on a log
grid together with its derivative (one `jax.jvp` per point); wherever the derivative changes sign
inside a grid step, the extremum there is located by bisection on the derivative's sign and sampled
too, so a dip (or a bump) narrower than one grid step is not missed; every sign change of the samples
is then refined by bisection in log x.
"""

from typing import NamedTuple

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


class SignChanges(NamedTuple):
    """Where g < 0 on [1, x_max] ("below"), from the refined samples; NaN where there is none."""

    outputs: object       # `values` on the log grid (leading axis = grid point; first = x 1)
    below_first: bool     # g(1) < 0
    below_last: bool      # g(x_max) < 0
    any_below: bool
    all_below: bool
    first_below: float    # first x with g < 0 (1 if g(1) < 0)
    last_down: float      # last crossing from g >= 0 to g < 0 (NaN if g(x_max) >= 0 or never >= 0)
    first_up: float       # first crossing from g < 0 to g >= 0
    n_up: int             # crossings from below to above (each closes one interval with g < 0)
    dips_from: jnp.ndarray  # (max_dips,) starts of the intervals with g < 0 that close, NaN padded
    dips_to: jnp.ndarray    # (max_dips,) their ends
    samples: int          # points sampled (grid + refined extrema)


def sign_changes(values, gap, x_max, n_grid, n_bisect, dtype, n_refine=4, refine_iters=24, max_dips=0):
    """Sign changes of g(x) = gap(values(x)) for x in [1, x_max] (see the module docstring).

    Args:
      values: x -> a pytree of outputs (vmappable, differentiable in x).
      gap: outputs -> g (e.g. speedup - 1).
      x_max: upper end. n_grid: log-grid points; n_bisect: halvings per crossing (static).
      n_refine: grid steps whose interior extremum is located and sampled (the n_refine most likely
        to hide a sign change, by a tangent-line estimate of the extremum); refine_iters halvings each.
      max_dips: how many closed below-intervals to locate (static; 0 for sweeps).

    Returns:
      `SignChanges`.
    """
    lx = jnp.log(jnp.asarray(x_max, dtype))
    u = jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * lx
    h = lambda uu: values(jnp.exp(uu))  # noqa: E731
    g_of = lambda uu: gap(h(uu))  # noqa: E731
    dg_of = lambda uu: jax.jvp(g_of, (uu,), (jnp.ones_like(uu),))[1]  # noqa: E731

    def on_grid(uu):
        outs, touts = jax.jvp(h, (uu,), (jnp.ones_like(uu),))
        g, dg = jax.jvp(gap, (outs,), (touts,))
        return outs, g, dg

    outs, g, dg = jax.vmap(on_grid)(u)
    ua, ub, ga, gb, da, db = u[:-1], u[1:], g[:-1], g[1:], dg[:-1], dg[1:]
    is_min = (da < 0) & (db > 0) & (ga >= 0) & (gb >= 0)  # could dip below 0 inside the step
    is_max = (da > 0) & (db < 0) & (ga < 0) & (gb < 0)    # could rise to 0 inside the step
    denom = jnp.where(da != db, da - db, 1.0)
    u_t = jnp.clip((gb - ga + da * ua - db * ub) / denom, ua, ub)  # where the end tangents meet
    v_t = ga + da * (u_t - ua)
    score = jnp.where(is_min, -v_t, jnp.where(is_max, v_t, -jnp.inf))
    n_refine = min(n_refine, n_grid - 1)
    _, idx = jax.lax.top_k(score, n_refine)
    cand = (is_min | is_max)[idx]

    def extremum(i):
        neg_a = da[i] < 0
        um = bisect(lambda uu: (dg_of(uu) < 0) == neg_a, ua[i], ub[i], refine_iters)
        return um, g_of(um)

    um, gm = jax.vmap(extremum)(idx)
    us = jnp.concatenate([u, jnp.where(cand, um, ua[idx])])
    gs = jnp.concatenate([g, jnp.where(cand, gm, ga[idx])])
    order = jnp.argsort(us, stable=True)
    us, gs = us[order], gs[order]
    below = gs < 0
    down, up = ~below[:-1] & below[1:], below[:-1] & ~below[1:]
    n = us.shape[0]

    def locate(j):  # the sign change in [us[j], us[j+1]], in log x
        return bisect(lambda uu: (g_of(uu) < 0) == below[j], us[j], us[j + 1], n_bisect)

    nan = jnp.asarray(jnp.nan, dtype)
    j_first_down, j_last_down, j_first_up = jnp.argmax(down), n - 2 - jnp.argmax(down[::-1]), jnp.argmax(up)
    if max_dips:
        j_up = jnp.nonzero(up, size=max_dips, fill_value=0)[0]
        j_down = jnp.nonzero(down, size=max_dips, fill_value=0)[0]
        start_j = jnp.where(below[0], jnp.concatenate([j_down[:1], j_down[:-1]]), j_down)
        js = jnp.concatenate([jnp.stack([j_first_down, j_last_down, j_first_up]), j_up, start_j])
    else:
        js = jnp.stack([j_first_down, j_last_down, j_first_up])
    x = jnp.exp(jax.vmap(locate)(js))
    any_down, n_up = down.any(), jnp.sum(up)
    first_below = jnp.where(below[0], jnp.asarray(1.0, dtype), jnp.where(any_down, x[0], nan))
    if max_dips:
        d = jnp.arange(max_dips)
        ok = d < n_up
        starts = jnp.where(below[0] & (d == 0), jnp.asarray(1.0, dtype), x[3 + max_dips:])
        dips_from, dips_to = jnp.where(ok, starts, nan), jnp.where(ok, x[3:3 + max_dips], nan)
    else:
        dips_from = dips_to = jnp.zeros((0,), dtype)
    return SignChanges(outputs=outs, below_first=below[0], below_last=below[-1], any_below=below.any(),
                       all_below=below.all(), first_below=first_below,
                       last_down=jnp.where(below[-1] & any_down, x[1], nan),
                       first_up=jnp.where(up.any(), x[2], nan), n_up=n_up, dips_from=dips_from, dips_to=dips_to,
                       samples=n)
