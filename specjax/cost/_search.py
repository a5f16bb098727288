"""Vmappable one-dimensional searches shared by the kernels (fixed iteration counts, no Python
control flow on traced values, so they jit and vmap).

`bisect` finds where a monotone predicate flips between two bounds; `golden_min` the minimum of a
function inside an interval. `sign_changes` finds every place where a smooth-or-kinked function g(x)
on [1, x_max] changes sign (docs/model.md §7): g is sampled on a log grid; a dip (or a bump) narrower than
one grid step leaves a discrete local minimum (maximum) on the grid beside it, and the extremum there
is located by golden-section search over the two neighbouring steps and sampled too, so it is not
missed; every sign change of the samples is then refined by bisection in log x. No derivatives, no
sort and no scatter: on a vmapped CPU sweep each of those costs more than the whole search.
Searches are not differentiable (`search.nograd`): use the implicit-function derivatives of `sensitivity`.
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


GOLDEN = 0.6180339887498949


def golden_min(f, lo, hi, iters):
    """A local minimum of `f` on [lo, hi] by golden-section search (`iters` shrinks, one evaluation
    each; the bracket shrinks by 0.618 per step). Returns (x, f(x))."""
    c, d = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)

    def body(_, st):
        a, b, c, d, fc, fd = st
        left = fc < fd  # the minimum is in [a, d]
        a2, b2 = jnp.where(left, a, c), jnp.where(left, d, b)
        c2 = jnp.where(left, b2 - GOLDEN * (b2 - a2), d)
        d2 = jnp.where(left, c, a2 + GOLDEN * (b2 - a2))
        f_new = f(jnp.where(left, c2, d2))
        return a2, b2, c2, d2, jnp.where(left, f_new, fd), jnp.where(left, fc, f_new)

    a, b, c, d, fc, fd = jax.lax.fori_loop(0, iters, body, (lo, hi, c, d, f(c), f(d)))
    return jnp.where(fc < fd, c, d), jnp.minimum(fc, fd)


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


def sign_changes(values, gap, x_max, n_grid, n_bisect, dtype, n_refine=2, refine_iters=16, max_dips=0,
                 batched=False):
    """Sign changes of g(x) = gap(values(x)) for x in [1, x_max] (see the module docstring).

    Args:
      values: x -> a pytree of outputs (vmappable, differentiable in x).
      gap: outputs -> g (e.g. speedup - 1).
      x_max: upper end. n_grid: log-grid points; n_bisect: halvings per crossing (static).
      n_refine: discrete local extrema of g on the grid that are refined (those nearest to a sign
        change first); refine_iters golden-section steps each.
      max_dips: how many closed below-intervals to locate (static; 0 for sweeps).
      batched: static; refine the extrema in one vmapped golden search and bisect every crossing in one
        vmapped loop, so `values` is traced 5 times instead of 2 n_refine + 3 + 2 max_dips + 1: for one
        curve (the CLI, where tracing is most of a warm run). Inside a vmapped sweep the sequential loops
        run faster on a CPU (35% more rows/s measured), so sweeps keep them. Same numbers either way.
    Returns:
      `SignChanges`.
    """
    lx = jnp.log(jnp.asarray(x_max, dtype))
    u = jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * lx
    g_of = lambda uu: gap(values(jnp.exp(uu)))  # noqa: E731
    outs = jax.vmap(lambda uu: values(jnp.exp(uu)))(u)
    g = gap(outs)
    # A dip (or bump) narrower than a grid step leaves a discrete local minimum (maximum) of g on the
    # grid next to it: refine the n_refine most promising ones over their two neighbouring steps.
    gl, gc, gr = g[:-2], g[1:-1], g[2:]
    is_min = (gc < gl) & (gc <= gr) & (gc >= 0)
    is_max = (gc > gl) & (gc >= gr) & (gc < 0)
    score = jnp.where(is_min, -gc, jnp.where(is_max, gc, -jnp.inf))  # nearest to a sign change first
    n_refine = min(n_refine, n_grid - 2)
    ua, ga = u[:-1], g[:-1]
    u_in, g_in = ua, ga  # interior sample of every grid step: its left end (changes nothing) unless refined
    steps = jnp.arange(n_grid - 2)
    step_of = jnp.arange(n_grid - 1)
    picks = []
    for _ in range(n_refine):  # the best remaining candidates (argmax and masks: no sort, no scatter)
        c = jnp.argmax(score)  # a local extremum at grid point c + 1
        score = jnp.where(steps == c, -jnp.inf, score)
        picks.append((c, jnp.where(jnp.any((steps == c) & is_max), -1.0, 1.0)))  # a bump is a minimum of -g

    def refine(c, sign):
        return golden_min(lambda uu: sign * g_of(uu), u[c], u[c + 2], refine_iters)

    if batched and picks:
        ums, hms = jax.vmap(refine)(*(jnp.stack(x) for x in zip(*picks)))
        found = [(ums[i], hms[i]) for i in range(len(picks))]
    else:
        found = [refine(c, sign) for c, sign in picks]
    for (c, sign), (um, hm) in zip(picks, found):
        ok = jnp.any((steps == c) & (is_min | is_max))
        k = jnp.where(um < u[c + 1], c, c + 1)  # the grid step the extremum lies in
        at = (step_of == k) & ok
        u_in, g_in = jnp.where(at, um, u_in), jnp.where(at, sign * hm, g_in)
    n = 2 * n_grid - 1
    us = jnp.concatenate([jnp.stack([ua, u_in], axis=1).reshape(-1), u[-1:]])  # u0, in0, u1, in1, ..., u_last
    gs = jnp.concatenate([jnp.stack([ga, g_in], axis=1).reshape(-1), g[-1:]])
    below = gs < 0
    down, up = ~below[:-1] & below[1:], below[:-1] & ~below[1:]

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
    if batched:  # every crossing in one vmapped bisection: the curve is traced once for all of them
        x = jnp.exp(jax.vmap(locate)(js))
    else:
        x = jnp.exp(jnp.stack([locate(js[i]) for i in range(js.shape[0])]))
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
                       samples=n_grid + n_refine)
