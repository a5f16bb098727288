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


def illinois(f, lo, hi, f_lo, f_hi, iters, halvings=0):
    """The point in [lo, hi] where `f` changes sign (below zero at one end, not below at the other; f(x) = 0
    counts as not below, as in `bisect`), in `halvings` bisection steps and then `iters` Illinois steps
    (static counts), each one evaluation of `f`.

    The halvings bound the error wherever the crossing is a kink or a jump of f (no interpolation gains
    there): the answer is then within the bracket they leave. The Illinois steps (regula falsi that halves
    the value kept at an end that stayed twice in a row; superlinear, order ~1.44) then take a smooth
    crossing to the dtype's resolution. A step whose interpolated point is not strictly inside the bracket
    (a NaN value, a converged bracket) bisects. `f_lo` and `f_hi` are f at the ends (already sampled).
    Returns the final bracket's secant root (with the true end values: an end where f is 0 there; the
    midpoint where the secant root is not in the bracket). Same numbers vmapped or not."""
    def secant(a, b, fa, fb, closed=False):
        x = (a * fb - b * fa) / (fb - fa)
        inside = (x >= a) & (x <= b) if closed else (x > a) & (x < b)
        return jnp.where(inside, x, 0.5 * (a + b))

    def body(i, st):
        a, b, fa, fb, wa, wb, kept = st  # w: the weighted end values; kept: +1 b kept last step, -1 a kept
        x = jnp.where(i < halvings, 0.5 * (a + b), secant(a, b, wa, wb))
        fx = f(x)
        like_a = (fx < 0) == (fa < 0)  # x replaces a
        wb = jnp.where(like_a, jnp.where(kept > 0, 0.5 * wb, wb), fx)
        wa = jnp.where(like_a, fx, jnp.where(kept < 0, 0.5 * wa, wa))
        return (jnp.where(like_a, x, a), jnp.where(like_a, b, x), jnp.where(like_a, fx, fa),
                jnp.where(like_a, fb, fx), wa, wb, jnp.where(like_a, 1, -1).astype(jnp.int8))

    a, b, fa, fb, *_ = jax.lax.fori_loop(0, halvings + iters, body,
                                         (lo, hi, f_lo, f_hi, f_lo, f_hi, jnp.zeros((), jnp.int8)))
    return secant(a, b, fa, fb, closed=True)


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
                 batched=False, n_root=None):
    """Sign changes of g(x) = gap(values(x)) for x in [1, x_max] (see the module docstring).

    Args:
      values: x -> a pytree of outputs (vmappable, differentiable in x).
      gap: outputs -> g (e.g. speedup - 1).
      x_max: upper end. n_grid: log-grid points; n_bisect: halvings per crossing (static).
      n_refine: discrete local extrema of g on the grid that are refined (those nearest to a sign
        change first); refine_iters golden-section steps each.
      max_dips: how many closed below-intervals to locate (static; 0 for sweeps).
      batched: static; refine the extrema in one vmapped golden search and locate every crossing in one
        vmapped loop, so `values` is traced 5 times instead of 2 n_refine + 3 + 2 max_dips + 1: for one
        curve (the CLI, where tracing is most of a warm run). Inside a vmapped sweep the sequential loops
        run faster on a CPU, so sweeps keep them. Same numbers either way.
      n_root: static; (halvings, Illinois steps) to locate each crossing from the samples on either side of
        it (`illinois`) instead of `n_bisect` halvings; None or 0: bisection.
    Returns:
      `SignChanges`.

    The samples are the grid plus one interior sample in each grid step that holds a refined extremum (at
    most n_refine steps): a transition of the samples is a grid step's own transition, or one of the two
    inside a refined step. The first and last transitions are found by `min`/`max` over the grid's
    transitions and a few scalar comparisons, the values around them by indexing: no `argmax` and no
    interleaved copy of the samples, which inside a vmapped CPU sweep cost several times the grid itself
    (bench/README.md, issue 30). Each loop starts from its bracket, computed before it.
    """
    lx = jnp.log(jnp.asarray(x_max, dtype))
    u = jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * lx
    g_of = lambda uu: gap(values(jnp.exp(uu)))  # noqa: E731
    outs = jax.vmap(lambda uu: values(jnp.exp(uu)))(u)
    g = gap(outs)
    b = g < 0
    # A dip (or bump) narrower than a grid step leaves a discrete local minimum (maximum) of g on the
    # grid next to it: refine the n_refine most promising ones over their two neighbouring steps.
    gl, gc, gr = g[:-2], g[1:-1], g[2:]
    is_min = (gc < gl) & (gc <= gr) & (gc >= 0)
    is_max = (gc > gl) & (gc >= gr) & (gc < 0)
    score = jnp.where(is_min, -gc, jnp.where(is_max, gc, -jnp.inf))  # nearest to a sign change first (no NaN)
    n_refine = min(n_refine, n_grid - 2)
    cand = jnp.arange(n_grid - 2)
    picks = []
    for p in range(n_refine):  # the best remaining candidates (`argmax` as max and min: no sort, no scatter)
        best = jnp.max(score)
        c = jnp.min(jnp.where(score == best, cand, n_grid - 3))  # a local extremum at grid point c + 1
        if p + 1 < n_refine:
            score = jnp.where(cand == c, -jnp.inf, score)
        ok = best > -jnp.inf  # c is an extremum (is_min: g >= 0 there; is_max: g < 0)
        sign = jnp.where(ok & (g[c + 1] < 0), -1.0, 1.0)  # a bump is a minimum of -g
        picks.append((c, sign, ok))

    def refine(c, sign):
        return golden_min(lambda uu: sign * g_of(uu), u[c], u[c + 2], refine_iters)

    if batched and picks:
        ums, hms = jax.vmap(refine)(*(jnp.stack([q[i] for q in picks]) for i in (0, 1)))
        found = [(ums[i], hms[i]) for i in range(len(picks))]
    else:
        found = [refine(c, sign) for c, sign, _ in picks]
    # (grid step, location, g) of each interior sample: the step the refined extremum lies in, -1 if none; a
    # later pick in the same step replaces an earlier one
    placed = [[jnp.where(ok, jnp.where(um < u[c + 1], c, c + 1), -1), um, sign * hm]
              for (c, sign, ok), (um, hm) in zip(picks, found)]
    for i, q in enumerate(placed):
        for later in placed[i + 1:]:
            q[0] = jnp.where(q[0] == later[0], -1, q[0])
    steps = jnp.arange(n_grid - 1)
    plain = jnp.ones((n_grid - 1,), bool)
    for k, _, _ in placed:
        plain = plain & (steps != k)
    down_g, up_g = ~b[:-1] & b[1:] & plain, b[:-1] & ~b[1:] & plain
    n = 2 * n_grid - 1  # samples u0, in0, u1, in1, ..., u_last (in_i = u_i where step i holds none)
    big = jnp.asarray(n, steps.dtype)
    j_grid = 2 * steps + 1  # a plain step's transition, in sample order

    def bracket_of_grid(j):
        i = jnp.clip((j - 1) // 2, 0, n_grid - 2)
        return u[i], u[i + 1], g[i], g[i + 1]

    inner = []  # per placed step: its two transitions (j, (lo, hi, g_lo, g_hi), down?, up?)
    for k, um, gm in placed:
        kk = jnp.maximum(k, 0)
        on, g0, g1, bm = k >= 0, g[kk], g[kk + 1], gm < 0
        inner.append((2 * kk, (u[kk], um, g0, gm), on & ~(g0 < 0) & bm, on & (g0 < 0) & ~bm))
        inner.append((2 * kk + 1, (um, u[kk + 1], gm, g1), on & ~bm & (g1 < 0), on & bm & ~(g1 < 0)))

    def first(mask, which):  # (any, bracket) of the first transition of `mask` (grid) / `which` (inner)
        j = jnp.min(jnp.where(mask, j_grid, big))
        for ji, _, dn, upw in inner:
            j = jnp.minimum(j, jnp.where(dn if which == "down" else upw, ji, big))
        return j < big, _select(j, bracket_of_grid(j), which)

    def last(mask, which):
        j = jnp.max(jnp.where(mask, j_grid, -1))
        for ji, _, dn, upw in inner:
            j = jnp.maximum(j, jnp.where(dn if which == "down" else upw, ji, -1))
        return j >= 0, _select(j, bracket_of_grid(j), which)

    def _select(j, grid_bracket, which):
        br = grid_bracket
        for ji, inner_br, dn, upw in inner:
            here = (j == ji) & (dn if which == "down" else upw)
            br = tuple(jnp.where(here, x, y) for x, y in zip(inner_br, br))
        return br

    any_down, fd = first(down_g, "down")
    _, ld = last(down_g, "down")
    any_up, fu = first(up_g, "up")
    brackets = [fd, ld, fu]
    n_up = jnp.sum(up_g)
    any_below, all_below = jnp.any(b), jnp.all(b)
    for k, _, gm in placed:
        any_below, all_below = any_below | ((k >= 0) & (gm < 0)), all_below & ((k < 0) | (gm < 0))
    for _, _, _, upw in inner:
        n_up = n_up + upw.astype(n_up.dtype)
    if max_dips:  # one curve (the CLI): the samples in order, and the j-th transitions of each kind
        ua, ga = u[:-1], g[:-1]
        u_in, g_in = ua, ga
        for k, um, gm in placed:
            u_in, g_in = jnp.where(steps == k, um, u_in), jnp.where(steps == k, gm, g_in)
        us = jnp.concatenate([jnp.stack([ua, u_in], axis=1).reshape(-1), u[-1:]])
        gs = jnp.concatenate([jnp.stack([ga, g_in], axis=1).reshape(-1), g[-1:]])
        below = gs < 0
        down, up = ~below[:-1] & below[1:], below[:-1] & ~below[1:]
        j_up = jnp.nonzero(up, size=max_dips, fill_value=0)[0]
        j_down = jnp.nonzero(down, size=max_dips, fill_value=0)[0]
        start_j = jnp.where(b[0], jnp.concatenate([j_down[:1], j_down[:-1]]), j_down)
        js = jnp.concatenate([j_up, start_j])
        brackets += [(us[j], us[j + 1], gs[j], gs[j + 1]) for j in (js[i] for i in range(2 * max_dips))]

    def locate(lo, hi, g_lo, g_hi):  # the sign change in [lo, hi], in log x
        if n_root:
            return illinois(g_of, lo, hi, g_lo, g_hi, n_root[1], halvings=n_root[0])
        return bisect(lambda uu: (g_of(uu) < 0) == (g_lo < 0), lo, hi, n_bisect)

    if batched:  # every crossing in one vmapped loop: the curve is traced once for all of them
        x = jnp.exp(jax.vmap(locate)(*(jnp.stack([q[i] for q in brackets]) for i in range(4))))
    else:
        x = jnp.exp(jnp.stack([locate(*q) for q in brackets]))
    nan = jnp.asarray(jnp.nan, dtype)
    first_below = jnp.where(b[0], jnp.asarray(1.0, dtype), jnp.where(any_down, x[0], nan))
    if max_dips:
        d = jnp.arange(max_dips)
        ok = d < n_up
        starts = jnp.where(b[0] & (d == 0), jnp.asarray(1.0, dtype), x[3 + max_dips:])
        dips_from, dips_to = jnp.where(ok, starts, nan), jnp.where(ok, x[3:3 + max_dips], nan)
    else:
        dips_from = dips_to = jnp.zeros((0,), dtype)
    return SignChanges(outputs=outs, below_first=b[0], below_last=b[-1], any_below=any_below,
                       all_below=all_below, first_below=first_below,
                       last_down=jnp.where(b[-1] & any_down, x[1], nan),
                       first_up=jnp.where(any_up, x[2], nan), n_up=n_up, dips_from=dips_from, dips_to=dips_to,
                       samples=n_grid + n_refine)
