"""Vmappable one-dimensional searches shared by the kernels (fixed iteration counts, no Python
control flow on traced values, so they jit and vmap).

`bisect` finds where a monotone predicate flips between two bounds; `golden_min` the minimum of a
function inside an interval. `sign_changes` finds every place where a smooth-or-kinked function g(x)
on [1, x_max] changes sign (docs/model.md §7): g is sampled on a log grid; a dip (or a bump) narrower than
one grid step leaves a discrete local minimum (maximum) on the grid beside it, and the extremum there
is located by golden-section search over the two neighbouring steps and sampled too, so it is not
missed; every sign change of the samples is then located in log x by bisection (`bisect`) or by
halvings then Illinois steps (`illinois`). The grid is walked in one loop (`_walk`). No derivatives, no
sort, no scatter, no `argmax` over the grid: on a vmapped CPU sweep each of those costs more than the
whole search.
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

    outputs: object       # `values` at x = 1 (a leading axis of length 1)
    below_first: bool     # g(1) < 0
    below_last: bool      # g(x_max) < 0
    any_below: bool
    all_below: bool
    first_below: float    # first x with g < 0 (1 if g(1) < 0)
    last_down: float      # last crossing from g >= 0 to g < 0 (NaN if g(x_max) >= 0 or never >= 0)
    first_up: float       # first crossing from g < 0 to g >= 0 (NaN where g(1) >= 0 with `first_up_if_below`)
    n_up: int             # crossings from below to above (each closes one interval with g < 0)
    dips_from: jnp.ndarray  # (max_dips,) starts of the intervals with g < 0 that close, NaN padded
    dips_to: jnp.ndarray    # (max_dips,) their ends
    samples: int          # points sampled (grid + refined extrema)


def sign_changes(values, gap, x_max, n_grid, n_bisect, dtype, n_refine=2, refine_iters=16, max_dips=0,
                 batched=False, n_root=None, first_up_if_below=False):
    """Sign changes of g(x) = gap(values(x)) for x in [1, x_max] (see the module docstring).

    Args:
      values: x -> a pytree of outputs (vmappable, differentiable in x).
      gap: outputs -> g (e.g. speedup - 1).
      x_max: upper end. n_grid: log-grid points; n_bisect: halvings per crossing (static).
      n_refine: discrete local extrema of g on the grid that are refined (those nearest to a sign
        change first); refine_iters golden-section steps each.
      max_dips: how many closed below-intervals to locate (static; 0 for sweeps).
      batched: static; refine the extrema in one vmapped golden search and locate every crossing in one
        vmapped loop, so `values` is traced 4 times instead of n_refine + 3 + 2 max_dips + 2 (one fewer with
        `first_up_if_below`): for one curve (the CLI, where tracing is most of a warm run). Inside a vmapped
        sweep the sequential loops run faster on a CPU, so sweeps keep them. Same numbers either way.
      n_root: static; (halvings, Illinois steps) to locate each crossing from the samples on either side of
        it (`illinois`) instead of `n_bisect` halvings; None: bisection.
      first_up_if_below: static; locate the first crossing up only where g(1) < 0 (`first_up` NaN elsewhere),
        in the root loop of the first crossing down, which is needed only where g(1) >= 0 (`first_below` is 1
        where g(1) < 0): two root loops instead of three, for callers that read `first_up` only where g(1) < 0
        (the crossover's `pays_from`). The other outputs are unchanged.
    Returns:
      `SignChanges`.

    The grid is walked in one loop (`_walk`) that keeps, per curve, only what the search needs: the first
    and last transitions of each kind with the samples around them, the count of crossings up, and the
    n_refine best extremum candidates with their neighbours. Inside a vmapped CPU sweep this costs less
    than the grid evaluated as an array and then reduced (`argmax`, `any`, gathers, interleaved copies:
    several times the grid itself; bench/README.md, issue 30). The samples are the grid plus one interior
    sample in each grid step that holds a refined extremum: a grid step's transition stays one transition
    of the same kind inside a refined step, and a step without one can gain two (a dip or a bump).
    """
    lx = jnp.log(jnp.asarray(x_max, dtype))
    u = jnp.linspace(0.0, 1.0, n_grid, dtype=dtype) * lx
    g_of = lambda uu: gap(values(jnp.exp(uu)))  # noqa: E731
    outs = values(jnp.exp(u[0]))
    n_refine = min(n_refine, n_grid - 2)
    w, g_grid = _walk(g_of, u, gap(outs), n_grid, n_refine, keep_grid=max_dips > 0)

    def refine(c, sign):
        return golden_min(lambda uu: sign * g_of(uu), u[c], u[c + 2], refine_iters)

    picks = [(c, jnp.where((score > -jnp.inf) & (gs[1] < 0), -1.0, 1.0), score > -jnp.inf, gs)
             for score, c, gs in w.picks]  # a bump (g < 0 at a local maximum) is a minimum of -g
    if batched and picks:
        ums, hms = jax.vmap(refine)(jnp.stack([q[0] for q in picks]), jnp.stack([q[1] for q in picks]))
        found = [(ums[i], hms[i]) for i in range(len(picks))]
    else:
        found = [refine(c, sign) for c, sign, _, _ in picks]
    # (grid step, location, g, g at the step's ends) of each interior sample: the step the refined extremum
    # lies in (-1 if none); a later pick in the same step replaces an earlier one
    placed = []
    for (c, sign, ok, (g0, g1, g2)), (um, hm) in zip(picks, found):
        left = um < u[c + 1]
        placed.append([jnp.where(ok, jnp.where(left, c, c + 1), -1), um, sign * hm,
                       jnp.where(left, g0, g1), jnp.where(left, g1, g2)])
    for i, q in enumerate(placed):
        for later in placed[i + 1:]:
            q[0] = jnp.where(q[0] == later[0], -1, q[0])
    n_steps = n_grid - 1
    none_first, none_last = jnp.asarray(2 * n_grid, jnp.int32), jnp.asarray(-1, jnp.int32)
    inner = []  # per placed step, its two transitions: (j in sample order, bracket, down?, up?)
    n_up, any_below, all_below = w.n_up, w.any_below, w.all_below
    for k, um, gm, gk0, gk1 in placed:
        on, kk = k >= 0, jnp.maximum(k, 0)
        b0, bm, b1 = gk0 < 0, gm < 0, gk1 < 0
        inner.append((2 * kk, (u[kk], um, gk0, gm), on & ~b0 & bm, on & b0 & ~bm))
        inner.append((2 * kk + 1, (um, u[kk + 1], gm, gk1), on & ~bm & b1, on & bm & ~b1))
        n_up = n_up - (on & b0 & ~b1).astype(n_up.dtype)  # the grid step's own crossing up, now inside it
        any_below, all_below = any_below | (on & bm), all_below & (~on | bm)
    for _, _, _, up in inner:
        n_up = n_up + up.astype(n_up.dtype)

    def pick(grid_step, grid_bracket, kind, last):
        """(any, bracket) of the first (last) transition of a kind, of the plain grid steps and the inner ones."""
        plain = (grid_step >= 0) & (grid_step < n_steps)
        for k, *_ in placed:
            plain = plain & (grid_step != k)
        none = none_last if last else none_first
        best = jnp.where(plain, 2 * grid_step + 1, none)
        br = grid_bracket
        for j, inner_br, down, up in inner:
            flag = down if kind == "down" else up
            better = flag & ((j > best) if last else (j < best))
            best = jnp.where(better, j, best)
            br = tuple(jnp.where(better, x, y) for x, y in zip(inner_br, br))
        return best != none, br

    any_down, fd = pick(w.first_down[0], w.first_down[1:], "down", False)
    _, ld = pick(w.last_down[0], w.last_down[1:], "down", True)
    any_up, fu = pick(w.first_up[0], w.first_up[1:], "up", False)
    below_first, below_last = w.g_first < 0, w.g_last < 0
    if first_up_if_below:  # one root loop for the first crossing down (g(1) >= 0) or the first up (g(1) < 0)
        brackets = [tuple(jnp.where(below_first, a, b) for a, b in zip(fu, fd)), ld]
    else:
        brackets = [fd, ld, fu]
    head = len(brackets)
    if max_dips:  # one curve (the CLI): the samples in order, and the j-th transitions of each kind
        steps = jnp.arange(n_steps, dtype=jnp.int32)
        ua, ga = u[:-1], g_grid[:-1]
        u_in, g_in = ua, ga
        for k, um, gm, _, _ in placed:
            u_in, g_in = jnp.where(steps == k, um, u_in), jnp.where(steps == k, gm, g_in)
        us = jnp.concatenate([jnp.stack([ua, u_in], axis=1).reshape(-1), u[-1:]])
        gs = jnp.concatenate([jnp.stack([ga, g_in], axis=1).reshape(-1), g_grid[-1:]])
        below = gs < 0
        down, up = ~below[:-1] & below[1:], below[:-1] & ~below[1:]
        j_up = jnp.nonzero(up, size=max_dips, fill_value=0)[0]
        j_down = jnp.nonzero(down, size=max_dips, fill_value=0)[0]
        start_j = jnp.where(below_first, jnp.concatenate([j_down[:1], j_down[:-1]]), j_down)
        js = jnp.concatenate([j_up, start_j])
        brackets += [(us[j], us[j + 1], gs[j], gs[j + 1]) for j in (js[i] for i in range(2 * max_dips))]

    def locate(lo, hi, g_lo, g_hi):  # the sign change in [lo, hi], in log x
        if n_root:
            return illinois(g_of, lo, hi, g_lo, g_hi, n_root[1], halvings=n_root[0])
        return bisect(lambda uu: (g_of(uu) < 0) == (g_lo < 0), lo, hi, n_bisect)

    if batched:  # every crossing in one vmapped loop: the curve is traced once for all of them
        x = jnp.exp(jax.vmap(locate)(*(jnp.stack([q[i] for q in brackets]) for i in range(4))))
    else:
        x = jnp.stack([jnp.exp(locate(*q)) for q in brackets])  # per root: an unused one is dropped
    nan = jnp.asarray(jnp.nan, dtype)
    first_below = jnp.where(below_first, jnp.asarray(1.0, dtype), jnp.where(any_down, x[0], nan))
    first_up = jnp.where(any_up & below_first, x[0], nan) if first_up_if_below else jnp.where(any_up, x[2], nan)
    if max_dips:
        d = jnp.arange(max_dips)
        ok = d < n_up
        starts = jnp.where(below_first & (d == 0), jnp.asarray(1.0, dtype), x[head + max_dips:])
        dips_from, dips_to = jnp.where(ok, starts, nan), jnp.where(ok, x[head:head + max_dips], nan)
    else:
        dips_from = dips_to = jnp.zeros((0,), dtype)
    return SignChanges(outputs=jax.tree.map(lambda v: jnp.asarray(v)[None], outs), below_first=below_first,
                       below_last=below_last, any_below=any_below, all_below=all_below, first_below=first_below,
                       last_down=jnp.where(below_last & any_down, x[1], nan),
                       first_up=first_up, n_up=n_up, dips_from=dips_from, dips_to=dips_to,
                       samples=n_grid + n_refine)


class _Walk(NamedTuple):
    """What `sign_changes` keeps of the grid (`_walk`). A transition is (grid step i, u_i, u_i+1, g_i,
    g_i+1), its step -1 (last) or n_grid (first) if there is none."""

    g_first: float
    g_last: float
    any_below: bool
    all_below: bool
    n_up: int
    first_down: tuple
    last_down: tuple
    first_up: tuple
    picks: list   # n_refine x (score, c, (g_c, g_c+1, g_c+2)): the best extremum candidates at grid point c + 1


def _walk(g_of, u, g0, n_grid, n_refine, keep_grid=False):
    """One loop over the grid points 1..n_grid-1 (g0 = g at point 0): a `_Walk`, and the grid's g values if
    `keep_grid` (else None). The candidates are ranked as `argmax` over the scores would rank them (the first
    of equal scores first): score = -g at a discrete local minimum with g >= 0, g at a local maximum with
    g < 0, -inf elsewhere (a dip or a bump nearest to a sign change first).

    The loop carries as little as it can, for under `vmap` on a CPU XLA writes every carried value in its own
    pass over the rows at every grid point (bench/README.md, issue 30): a transition keeps its grid step and
    its two g values (the u values follow from the step after the loop), a candidate its grid point and its
    three g values (its score is -|g| at the middle one; an empty one has g = inf there, so score -inf), and
    `any_below` / `all_below` are one count of the points below."""
    i32 = jnp.int32
    neg = jnp.asarray(-jnp.inf, g0.dtype)
    none_first, none_last = jnp.asarray(n_grid, i32), jnp.asarray(-1, i32)
    zero = jnp.zeros_like(g0)
    empty = lambda step: (step, zero, zero)  # noqa: E731
    count = jax.dtypes.canonicalize_dtype(jnp.int64)  # n_up's dtype: that of `jnp.sum` of booleans
    state = dict(g1=g0, g2=g0, n_below=(g0 < 0).astype(i32), n_up=jnp.zeros((), count),
                 first_down=empty(none_first), last_down=empty(none_last), first_up=empty(none_first),
                 picks=[(jnp.zeros((), i32), (zero, jnp.full_like(g0, jnp.inf), zero)) for _ in range(n_refine)])

    def body(st, i):
        gi = g_of(u[i])
        gp, gpp = st["g1"], st["g2"]  # g at points i - 1 and i - 2
        bp, bi = gp < 0, gi < 0
        down, up = ~bp & bi, bp & ~bi
        tr = (i - 1, gp, gi)
        sel = lambda flag, new, old: tuple(jnp.where(flag, a, b) for a, b in zip(new, old))  # noqa: E731
        out = dict(g1=gi, g2=gp, n_below=st["n_below"] + bi.astype(i32), n_up=st["n_up"] + up.astype(count),
                   first_down=sel(down & (st["first_down"][0] == none_first), tr, st["first_down"]),
                   last_down=sel(down, tr, st["last_down"]),
                   first_up=sel(up & (st["first_up"][0] == none_first), tr, st["first_up"]))
        # the candidate at grid point i - 1 (from i = 2 on), inserted into the ranked picks
        is_min = (gp < gpp) & (gp <= gi) & (gp >= 0)
        is_max = (gp > gpp) & (gp >= gi) & (gp < 0)
        score = jnp.where(i >= 2, jnp.where(is_min, -gp, jnp.where(is_max, gp, neg)), neg)
        cand = (score, i - 2, (gpp, gp, gi))
        picks = []
        for c_p, gs_p in st["picks"]:  # strictly better than pick p: it goes there, the rest move down
            s_p = -jnp.abs(gs_p[1])
            better = cand[0] > s_p
            picks.append((jnp.where(better, cand[1], c_p), sel(better, cand[2], gs_p)))
            cand = (jnp.where(better, s_p, cand[0]), jnp.where(better, c_p, cand[1]), sel(better, gs_p, cand[2]))
        out["picks"] = picks
        return out, (gi if keep_grid else None)

    st, gs = jax.lax.scan(body, state, jnp.arange(1, n_grid, dtype=i32))
    g_grid = jnp.concatenate([g0[None], gs]) if keep_grid else None

    def transition(t):  # (step, u_step, u_step+1, g, g), u 0 where there is none
        k = t[0]
        kk = jnp.clip(k, 0, n_grid - 2)
        on = (k >= 0) & (k < n_grid - 1)
        return (k, jnp.where(on, u[kk], zero), jnp.where(on, u[kk + 1], zero), t[1], t[2])

    picks = []
    for c, (ga, gb, gc) in st["picks"]:
        score = -jnp.abs(gb)
        picks.append((score, c, (ga, jnp.where(score > neg, gb, zero), gc)))
    return _Walk(g_first=g0, g_last=st["g1"], any_below=st["n_below"] > 0, all_below=st["n_below"] == n_grid,
                 n_up=st["n_up"], first_down=transition(st["first_down"]), last_down=transition(st["last_down"]),
                 first_up=transition(st["first_up"]), picks=picks), g_grid
