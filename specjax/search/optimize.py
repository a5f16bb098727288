"""Optimal draft length k* by gradient search with optax (docs/model.md §8).

k is relaxed to a real number in [1, k_max]; `optax.adam` with a cosine-decayed step size
maximises log S from several starting points (vmapped), each iterate projected back with
`optax.projections.projection_box` inside a `lax.scan`. The integers either side of every
end point are then evaluated exactly, and from the best of them an integer hill climb (k - 1,
k + 1, a few steps) finishes the search: the relaxed objective has kinks where an operator turns
compute-bound, and a gradient step can stop on the wrong side of one. k* = 0 ("switch speculation
off") when no k >= 1 gives S > 1. Pure and vmappable over a grid of configurations.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..cost import lanes
from ..cost._search import sign_changes
from ..cost.acceptance import max_tree_tokens
from .crossover import bisect_steps
from .nograd import no_gradient
from ..cost.precision import float_dtype
from ..cost.speculative import step


class Optimum(NamedTuple):
    k_star: float       # integer k* (0 = do not speculate)
    speedup: float      # S at k* (1 when k* = 0)
    k_relaxed: float    # best continuous optimum found by the gradient search


def _log_speedup(k, hw, deploy, target, draft, dec):
    return jnp.log(step(hw, deploy, target, draft, dec.replace(k=k)).speedup)


CLIMB_STEPS = 4  # integer hill-climb steps after the gradient search


def search(hw, deploy, target, draft, dec, k_max=16, starts=(1.0, 4.0, 10.0), steps=60, learning_rate=0.5):
    """k* at the operating point `dec` (its `k` is ignored). Static: k_max, starts, steps."""
    import optax  # here, not at module level: commands that never search k start faster

    dtype = float_dtype(dec.alpha)
    k_hi = float(k_max)
    k0 = jnp.clip(jnp.asarray(starts, dtype), 1.0, k_hi)
    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=0.01))
    grad = jax.grad(lambda k: -_log_speedup(k, hw, deploy, target, draft, dec))

    def one_start(k):
        def body(carry, _):
            k, state = carry
            with jax.numpy_dtype_promotion("standard"):  # optax's Adam promotes its int32 step count
                updates, state = opt.update(grad(k), state, k)
            k = optax.projections.projection_box(optax.apply_updates(k, updates), 1.0, k_hi)
            return (k, state), None

        with jax.numpy_dtype_promotion("standard"):
            state = opt.init(k)
        (k, _), _ = jax.lax.scan(body, (k, state), None, length=steps)
        return k

    ends = jax.vmap(one_start)(k0)
    s_of = lambda k: step(hw, deploy, target, draft, dec.replace(k=k)).speedup  # noqa: E731
    cands = jnp.clip(jnp.concatenate([jnp.floor(ends), jnp.ceil(ends)]), 1.0, k_hi)
    s = jax.vmap(s_of)(cands)
    best = lanes.argmax(s)

    def climb(_, ks):  # one integer step towards the better neighbour, if it is better
        k, sk = ks
        nb = jnp.clip(jnp.stack([k - 1.0, k + 1.0]), 1.0, k_hi)
        snb = jax.vmap(s_of)(nb)
        i = lanes.argmax(snb)
        up = lanes.take(snb, i) > sk
        return jnp.where(up, lanes.take(nb, i), k), jnp.where(up, lanes.take(snb, i), sk)

    k_best, s_best = jax.lax.fori_loop(0, CLIMB_STEPS, climb, (lanes.take(cands, best), lanes.take(s, best)))
    s_cont = jax.vmap(s_of)(ends)
    helps = s_best > 1.0
    return Optimum(k_star=jnp.where(helps, k_best, 0.0), speedup=jnp.where(helps, s_best, 1.0),
                   k_relaxed=lanes.take(ends, lanes.argmax(s_cont)))


_GUARD = no_gradient("optimize (k*)", "sensitivity at the chosen k (api.sensitivity with k = k*): k* is an "
                     "integer, so its derivative is 0 almost everywhere")


def best_k(hw, deploy, target, draft, dec, k_max=16, method="optax"):
    """k* by `method`: "optax" (gradient search, `search`) or "brute" (every integer, `brute_force`;
    about 70x cheaper for k_max <= 64, k_relaxed is NaN). Both return an `Optimum`. Not differentiable
    (a derivative through it raises `errors.NotDifferentiable`)."""
    hw, deploy, target, draft, dec = _GUARD((hw, deploy, target, draft, dec))
    if method == "optax":
        return search(hw, deploy, target, draft, dec, k_max)
    if method != "brute":
        raise ValueError(f"method={method!r}; expected 'optax' or 'brute'")
    k, s = brute_force(hw, deploy, target, draft, dec, k_max)
    return Optimum(k_star=k, speedup=s, k_relaxed=jnp.full_like(s, jnp.nan))


def speedups_by_k(hw, deploy, target, draft, dec, k_max=16):
    """(ks, S at each integer k = 1..k_max) at the operating point `dec`."""
    ks = jnp.arange(1, k_max + 1, dtype=float_dtype(dec.alpha))
    return ks, jax.vmap(lambda k: step(hw, deploy, target, draft, dec.replace(k=k)).speedup)(ks)


def brute_force(hw, deploy, target, draft, dec, k_max=16):
    """Reference k*: evaluate every integer k = 1..k_max; 0 when none pays.

    One `lax.scan` over k carries the best S and its k (the first of equal values; a NaN S wins the first,
    as `jnp.argmax` ranks): in a vmapped sweep this runs faster than the k points evaluated as an array and
    reduced (bench/README.md, issue 30), with the same answer."""
    ks = jnp.arange(1, k_max + 1, dtype=float_dtype(dec.alpha))

    def ranked(c, k):
        s_best, k_best = c
        s = step(hw, deploy, target, draft, dec.replace(k=k)).speedup
        wins = (s > s_best) | (jnp.isnan(s) & ~jnp.isnan(s_best))
        return (jnp.where(wins, s, s_best), jnp.where(wins, k, k_best)), None

    s1 = step(hw, deploy, target, draft, dec.replace(k=ks[0])).speedup
    (s_best, k_best), _ = jax.lax.scan(ranked, (s1, jnp.full_like(s1, ks[0])), ks[1:])
    helps = s_best > 1.0
    return jnp.where(helps, k_best, 0.0), jnp.where(helps, s_best, 1.0)


def best_speedup(hw, deploy, target, draft, dec, batch, k_max=16):
    """Envelope max over integer k = 1..k_max of S at `batch` (below 1 where no k pays)."""
    return lanes.max_(speedups_by_k(hw, deploy, target, draft, dec.replace(batch=batch), k_max)[1])


def switch_off_batch(hw, deploy, target, draft, dec, k_max=16, batch_max=65536.0, n_grid=96, n_bisect=None):
    """The batch beyond which even the best integer k no longer pays: the last crossing of the envelope
    max_k S(B, k) from >= 1 to < 1 below `batch_max` (NaN if it still pays at the bound, or never).

    The same search as `crossover.find` (docs/model.md §7), on the envelope."""
    return envelope(hw, deploy, target, draft, dec, k_max, batch_max, n_grid, n_bisect).last_down


_ENVELOPE_GUARD = no_gradient("optimize.switch_off_batch (the best-k envelope's switch-off batch)",
                              "sensitivity.crossover_sensitivity at a fixed k (`specjax sensitivity`)")


def envelope(hw, deploy, target, draft, dec, k_max=16, batch_max=65536.0, n_grid=96, n_bisect=None, batched=False):
    """`_search.SignChanges` of max_k S(B, k) - 1 on [1, batch_max] (`batched`: see `sign_changes`). Not
    differentiable (a search over batch and k)."""
    hw, deploy, target, draft, dec = _ENVELOPE_GUARD((hw, deploy, target, draft, dec))
    return sign_changes(lambda x: best_speedup(hw, deploy, target, draft, dec, x, k_max), lambda env: env - 1.0,
                        batch_max, n_grid, n_bisect or bisect_steps(float_dtype(dec.alpha)), float_dtype(dec.alpha),
                        batched=batched)


TREE_TOKENS = (3, 4, 6, 8, 10, 12, 16, 21, 24, 32, 48, 64)  # verify widths tried for trees (SGLang-like)


def tree_shapes(max_depth=8, topks=(1, 2, 4, 8), max_tokens=64):
    """The draft shapes `best_tree` compares, as an (n, 3) array of (depth, topk, tokens): every chain
    (topk 1, depth + 1 tokens) and, for wider trees, every width of `TREE_TOKENS` between depth + 2 and
    the most a tree of that depth and branching holds (1 + sum_d topk^d, at most `max_tokens`)."""
    shapes = []
    for d in range(1, max_depth + 1):
        for w in topks:
            if w == 1:
                shapes.append((d, 1, d + 1))
                continue
            with jax.ensure_compile_time_eval():  # a constant, also when called under jit
                most = min(max_tokens, int(max_tree_tokens(w, d)))
            shapes += [(d, w, n) for n in sorted(set(TREE_TOKENS) | {most}) if d + 1 < n <= most]
    return jnp.asarray(shapes, dtype=float)


class TreeOptimum(NamedTuple):
    depth: float
    topk: float
    tokens: float
    speedup: float      # S of that shape (below 1 where no shape pays: switch speculation off)


def best_tree(hw, deploy, target, draft, dec, shapes):
    """The draft shape (depth, topk, tokens) with the largest S at the operating point `dec`, by
    evaluating every row of `shapes` (`tree_shapes`); a chain is the shape (k, 1, k + 1)."""
    shapes = shapes.astype(float_dtype(dec.alpha))

    def s_of(shape):
        shaped = dec.replace(k=shape[0], tree_topk=shape[1], tree_tokens=shape[2])
        return step(hw, deploy, target, draft, shaped).speedup

    s = jax.vmap(s_of)(shapes)
    i = jnp.argmax(s)
    return TreeOptimum(depth=shapes[i, 0], topk=shapes[i, 1], tokens=shapes[i, 2], speedup=s[i])
