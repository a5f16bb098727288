"""Vmappable one-dimensional searches shared by the kernels (fixed iteration counts, no Python
control flow on traced values, so they jit and vmap).

`bisect` finds where a monotone predicate flips between two bounds; `golden_min` the minimum of a
function inside an interval. `sign_changes` finds every place where a smooth-or-kinked function g(x)
on [1, x_max] changes sign (docs/model.md §7): g is sampled on a log grid; a dip (or a bump) narrower than
one grid step leaves a discrete local minimum (maximum) on the grid beside it, and the extremum there
is located by golden-section search over the two neighbouring steps and sampled too, so it is not
missed; every sign change of the samples is then refined by bisection in log x. No derivatives, no
sort and no scatter: on a vmapped CPU sweep each of those costs more than the whole search.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import lanes


def no_gradient(entry, instead):
    """An identity on a pytree of inputs that raises `errors.NotDifferentiable` (naming `entry` and what to
    use `instead`) when a derivative is taken through it (`jax.grad`, `jax.jvp`, `jax.jacfwd`, ...; the rule
    runs while the derivative is traced, so nothing is computed). A search locates its answer with
    comparisons, loops and index trees: differentiated as code it would give 0 (or fail deep inside a loop)
    instead of the implicit-function derivative. Evaluation, `jit` and `vmap` are unaffected."""
    @jax.custom_jvp
    def identity(tree):
        return tree

    @identity.defjvp
    def _raise(primals, tangents):
        from ..errors import NotDifferentiable

        raise NotDifferentiable(f"{entry} is a search and has no derivative (its answer is located by "
                                f"comparisons); use {instead}")

    return identity


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


def golden_carried(f, bounds, key, iters, active=True):
    """`golden_min(lambda x: f(x, key), *bounds(key), iters)`, the same points and numbers, for a vmapped
    sweep: the bracket is computed inside the loop from the carried `key` (iters + 2 evaluations, the first
    two at the initial interior points), and the loop stops where `active` is False.

    The loop returns the key: an index computed by an elementwise tree (`cost.lanes`) is then evaluated
    once, where XLA:CPU would copy the tree into every fusion that reads it (it drops
    `optimization_barrier`s). Under `vmap` the loop runs while any row is active, so a chunk of rows that
    need no search (`active` False: the caller discards their (x, f(x))) skips it. Returns (key, x, f(x))."""
    dtype = jnp.result_type(bounds(key)[0])

    def cond(st):
        return st[-1] & (st[0] < iters + 2)

    def body(st):
        i, key, a, b, c, d, fc, fd, on = st
        lo, hi = bounds(key)
        first = i == 0
        a, b = jnp.where(first, lo, a), jnp.where(first, hi, b)
        c, d = jnp.where(first, hi - GOLDEN * (hi - lo), c), jnp.where(first, lo + GOLDEN * (hi - lo), d)
        left = fc < fd  # the golden step (used from the third evaluation on)
        a2, b2 = jnp.where(left, a, c), jnp.where(left, d, b)
        c2 = jnp.where(left, b2 - GOLDEN * (b2 - a2), d)
        d2 = jnp.where(left, c, a2 + GOLDEN * (b2 - a2))
        fx = f(jnp.where(first, c, jnp.where(i == 1, d, jnp.where(left, c2, d2))), key)
        step = i >= 2
        fc, fd = (jnp.where(first, fx, jnp.where(step, jnp.where(left, fx, fd), fc)),
                  jnp.where(i == 1, fx, jnp.where(step, jnp.where(left, fc, fx), fd)))
        a, b, c, d = (jnp.where(step, a2, a), jnp.where(step, b2, b), jnp.where(step, c2, c),
                      jnp.where(step, d2, d))
        return i + 1, key, a, b, c, d, fc, fd, on

    z = jnp.zeros((), dtype)
    _, key, a, b, c, d, fc, fd, _ = jax.lax.while_loop(
        cond, body, (jnp.zeros((), jnp.int32), key, z, z, z, z, z, z, jnp.asarray(active, bool)))
    return key, jnp.where(fc < fd, c, d), jnp.minimum(fc, fd)


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
    # Lanes (`cost.lanes`): per grid point, reduced by elementwise trees, never arrays that depend on a
    # per-row index (each element of such an array would recompute the index's whole tree).
    n_refine = min(n_refine, n_grid - 2)
    is_min = [(g[i + 1] < g[i]) & (g[i + 1] <= g[i + 2]) & (g[i + 1] >= 0) for i in range(n_grid - 2)]
    is_max = [(g[i + 1] > g[i]) & (g[i + 1] >= g[i + 2]) & (g[i + 1] < 0) for i in range(n_grid - 2)]
    score = [jnp.where(mn, -g[i + 1], jnp.where(mx, g[i + 1], -jnp.inf))  # nearest to a sign change first
             for i, (mn, mx) in enumerate(zip(is_min, is_max))]
    is_max_at, is_ext_at = jnp.stack(is_max), jnp.stack([mn | mx for mn, mx in zip(is_min, is_max)])
    sign_at = lambda c: jnp.where(is_max_at[c], -1.0, 1.0)  # noqa: E731  (a bump is a minimum of -g)
    placed = []  # (pick, sign, extremum?, location, value) of each refined candidate
    for p in range(n_refine):  # the best remaining candidates (argmax and masks: no sort, no scatter)
        c = lanes.argmax(score)  # a local extremum at grid point c + 1
        if p + 1 < n_refine:
            score = [jnp.where(c == i, -jnp.inf, sc) for i, sc in enumerate(score)]
        if batched:
            placed.append((c, sign_at(c), is_ext_at[c]))
        else:  # a vmapped sweep: c carried through the search's loop (see `golden_carried`)
            c, um, hm = golden_carried(lambda uu, cc: sign_at(cc) * g_of(uu), lambda cc: (u[cc], u[cc + 2]), c,
                                       refine_iters, active=lanes.take([mn | mx for mn, mx in zip(is_min, is_max)], c))
            placed.append((c, sign_at(c), is_ext_at[c], um, hm))
    if batched and placed:  # one vmapped golden search for every pick: the curve is traced once for them
        cs, signs, oks = (jnp.stack(x) for x in zip(*[q[:3] for q in placed]))
        ums, hms = jax.vmap(lambda cc, sg: golden_min(lambda uu: sg * g_of(uu), u[cc], u[cc + 2], refine_iters))(
            cs, signs)
        placed = [(cs[i], signs[i], oks[i], ums[i], hms[i]) for i in range(len(placed))]
    # Every grid step i gets one interior sample: its left end (which changes nothing) unless a refined
    # extremum lies in it (a later pick wins). The samples in order are u0, in0, u1, in1, ..., u_last.
    placed = [(jnp.where(ok, jnp.where(um < u[c + 1], c, c + 1), -1), um, sign * hm)
              for c, sign, ok, um, hm in placed]

    def interior(i, u_i, g_i):  # (location, g) of the interior sample of grid step i (traced or static i)
        for k, um, gm in placed:
            u_i, g_i = jnp.where(k == i, um, u_i), jnp.where(k == i, gm, g_i)
        return u_i, g_i

    # The samples' sign changes, per grid step i: from u_i to in_i (transition 2i) and from in_i to u_i+1
    # (2i + 1). Kept as per-step lanes reduced by elementwise trees (`lanes`), never as an interleaved
    # array per row: on a vmapped CPU sweep the concatenations, gathers and `argmax`es of that array
    # cost several times the grid itself; the trees fuse with the grid (bench/reductions.py).
    n = 2 * n_grid - 1  # samples
    none_first, none_last = jnp.asarray(n - 1, lanes.index_dtype()), jnp.asarray(-1, lanes.index_dtype())
    first_down, last_down, first_up, ups = [], [], [], []
    for i in range(n_grid - 1):
        b_left, b_right = g[i] < 0, g[i + 1] < 0
        b_in = interior(i, u[i], g[i])[1] < 0
        d0, d1, u0, u1 = ~b_left & b_in, ~b_in & b_right, b_left & ~b_in, b_in & ~b_right
        first_down.append(jnp.where(d0, 2 * i, jnp.where(d1, 2 * i + 1, none_first)))
        last_down.append(jnp.where(d1, 2 * i + 1, jnp.where(d0, 2 * i, none_last)))
        first_up.append(jnp.where(u0, 2 * i, jnp.where(u1, 2 * i + 1, none_first)))
        ups.append(u0.astype(lanes.index_dtype()) + u1.astype(lanes.index_dtype()))
    fd, ld, fu = (lanes.tree(first_down, jnp.minimum), lanes.tree(last_down, jnp.maximum),
                  lanes.tree(first_up, jnp.minimum))
    below_first, below_last = g[0] < 0, g[n_grid - 1] < 0
    zero = jnp.zeros((), lanes.index_dtype())

    def bracket(j):  # (lo, hi, g(lo) < 0) of the sign change between samples j and j + 1, in log x
        h, odd = j // 2, j % 2 == 1  # samples (u_h, in_h) if j is even, else (in_h, u_h+1)
        u_h, g_h = interior(h, u[h], g[h])
        return jnp.where(odd, u_h, u[h]), jnp.where(odd, u[h + 1], u_h), jnp.where(odd, g_h < 0, g[h] < 0)

    def locate(j):  # bisect the sign change after sample j
        lo, hi, was_below = bracket(j)
        return bisect(lambda uu: (g_of(uu) < 0) == was_below, lo, hi, n_bisect)

    def locate_carried(raw, none, active):
        """`locate` of transition `raw` for a vmapped sweep, where `raw` is `none` if there is no such
        transition (its location is then discarded by the caller, as where `active` is False). The
        bracket is computed inside the bisection loop from the carried index, which the loop returns (a
        fusion boundary XLA keeps: see `golden_carried`). The loop stops once the midpoint rounds to an
        end of the bracket, after which further halvings cannot change it: the same number as `n_bisect`
        halvings, while a chunk whose rows all have converged (or have no such crossing) stops early.
        Returns (raw, location in log x)."""
        def at(raw):
            return bracket(jnp.where(raw == none, n - 2 if none < 0 else 0, raw))

        def cond(st):
            i, _, a, b, on = st
            mid = 0.5 * (a + b)
            return on & ((i == 0) | ((i < n_bisect) & (mid != a) & (mid != b) & ~jnp.isnan(mid)))

        def body(st):
            i, raw, a, b, on = st
            lo, hi, was_below = at(raw)
            a, b = jnp.where(i == 0, lo, a), jnp.where(i == 0, hi, b)
            mid = 0.5 * (a + b)
            low = (g_of(mid) < 0) == was_below
            return i + 1, raw, jnp.where(low, mid, a), jnp.where(low, b, mid), on

        if n_bisect == 0:
            lo, hi, _ = at(raw)
            return raw, 0.5 * (lo + hi)
        start = jnp.zeros((), dtype)
        _, raw, a, b, _ = jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), raw, start, start,
                                                          active & (raw != none)))
        return raw, 0.5 * (a + b)

    nan = jnp.asarray(jnp.nan, dtype)
    if batched or max_dips:
        any_down, any_up = fd < n - 1, fu < n - 1
        j_first_down, j_last_down, j_first_up = jnp.where(any_down, fd, zero), jnp.where(ld < 0, n - 2, ld), \
            jnp.where(any_up, fu, zero)
        n_up = lanes.tree(ups, jnp.add)
    if max_dips:  # one curve (the CLI): the transitions as arrays
        below = jnp.stack([x for i in range(n_grid - 1) for x in (g[i] < 0, interior(i, u[i], g[i])[1] < 0)] +
                          [below_last])
        down, up = ~below[:-1] & below[1:], below[:-1] & ~below[1:]
        j_up = jnp.nonzero(up, size=max_dips, fill_value=0)[0]
        j_down = jnp.nonzero(down, size=max_dips, fill_value=0)[0]
        start_j = jnp.where(below_first, jnp.concatenate([j_down[:1], j_down[:-1]]), j_down)
        js = jnp.concatenate([jnp.stack([j_first_down, j_last_down, j_first_up]), j_up, start_j])
    elif batched:
        js = jnp.stack([j_first_down, j_last_down, j_first_up])
    if batched:  # every crossing in one vmapped bisection: the curve is traced once for all of them
        x = jnp.exp(jax.vmap(locate)(js))
    else:  # a vmapped sweep: one loop per crossing, each carrying its index out (see `locate_carried`)
        # each searched only where its location is used (see the `SignChanges` fields below)
        ld, u_ld = locate_carried(ld, -1, below_last)
        fu, u_fu = locate_carried(fu, n - 1, True)
        same = (fd == ld) & below_last  # one crossing down, searched as the last one
        fd, u_fd = locate_carried(fd, n - 1, ~same & ~below_first)
        u_fd = jnp.where(same, u_ld, u_fd)
        dips = [locate(js[i]) for i in range(3, js.shape[0])] if max_dips else []
        x = jnp.exp(jnp.stack([u_fd, u_ld, u_fu] + dips))
        any_down, any_up = fd < n - 1, fu < n - 1
        n_up = lanes.tree(ups, jnp.add)
    first_below = jnp.where(below_first, jnp.asarray(1.0, dtype), jnp.where(any_down, x[0], nan))
    if max_dips:
        d = jnp.arange(max_dips)
        ok = d < n_up
        starts = jnp.where(below_first & (d == 0), jnp.asarray(1.0, dtype), x[3 + max_dips:])
        dips_from, dips_to = jnp.where(ok, starts, nan), jnp.where(ok, x[3:3 + max_dips], nan)
    else:
        dips_from = dips_to = jnp.zeros((0,), dtype)
    return SignChanges(outputs=outs, below_first=below_first, below_last=below_last,
                       any_below=below_first | any_down, all_below=below_first & ~any_up, first_below=first_below,
                       last_down=jnp.where(below_last & any_down, x[1], nan),
                       first_up=jnp.where(any_up, x[2], nan), n_up=n_up, dips_from=dips_from, dips_to=dips_to,
                       samples=n_grid + n_refine)
