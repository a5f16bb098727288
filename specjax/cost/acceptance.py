"""Expected tokens per speculative step and its inverse (Leviathan et al. 2023, i.i.d. acceptance).

tau(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha): the drafter proposes k tokens, each accepted
with probability alpha until the first rejection, plus the target's bonus token. The formula
is 0/0 at alpha = 1; near 1 we use the series in e = alpha - 1,
  tau = m + m(m-1)/2 e + m(m-1)(m-2)/6 e^2 + m(m-1)(m-2)(m-3)/24 e^3,  m = k + 1,
behind a double `jnp.where`, so value (k+1) and d tau/d alpha (k(k+1)/2) are finite there.
k may be real (the optimiser relaxes it); k = 0 gives tau = 1.
"""

import jax.numpy as jnp

from ._search import bisect
from .precision import float_dtype


def _series_width(dtype):
    return 1e-4 if jnp.finfo(dtype).bits >= 64 else 2e-3


def tokens_per_step(alpha, k):
    """Expected tokens emitted per sequence per step, tau(alpha, k), for alpha in [0, 1], k >= 0."""
    alpha, k = jnp.asarray(alpha), jnp.asarray(k)
    dtype = float_dtype(alpha, k)
    alpha, k = alpha.astype(dtype), k.astype(dtype)
    m = k + 1.0
    near = jnp.abs(1.0 - alpha) < _series_width(dtype)
    a_far = jnp.where(near, 0.5, alpha)
    # alpha^m with alpha = 0 must be 0 with a finite gradient in alpha and k.
    pos = a_far > 0
    pow_m = jnp.where(pos, jnp.exp(m * jnp.log(jnp.where(pos, a_far, 1.0))), 0.0)
    far = (1.0 - pow_m) / (1.0 - a_far)
    e = jnp.where(near, alpha - 1.0, 0.0)
    series = m + m * (m - 1) / 2 * e + m * (m - 1) * (m - 2) / 6 * e**2 + m * (m - 1) * (m - 2) * (m - 3) / 24 * e**3
    return jnp.where(near, series, far)


def alpha_from_tokens(tau, k, iters=64):
    """Solve tau(alpha, k) = tau for alpha in [0, 1] by bisection (tau is increasing in alpha).

    `tau` is the mean accepted length including the bonus token, in [1, k+1]. Jittable and
    vmappable; 64 halvings reach float64 resolution.
    """
    tau, k = jnp.asarray(tau), jnp.asarray(k)
    dtype = float_dtype(tau, k)
    tau, k = tau.astype(dtype), k.astype(dtype)

    return bisect(lambda a: tokens_per_step(a, k) < tau, jnp.zeros_like(tau), jnp.ones_like(tau), iters)


def tokens_from_rates(rates, k):
    """tau = 1 + sum_{i<=k} prod_{j<=i} a_j from conditional per-position rates `rates` (a_1..a_V, last
    axis; docs/model.md §4.3). Beyond position V, a_i stays at a_V (a geometric tail, closed form). k may be
    real: position i counts with weight clip(k - i + 1, 0, 1), so tau is piecewise linear in k up to V
    and equals the sum at every integer k; with equal rates it equals `tokens_per_step` at integer k."""
    rates, k = jnp.asarray(rates), jnp.asarray(k)
    dtype = float_dtype(rates, k)
    rates, k = rates.astype(dtype), k.astype(dtype)
    v = rates.shape[-1]
    head, r_v = 0.0, 1.0
    for i in range(v):  # r_i = prod_{j<=i} a_j, unrolled: a cumprod lowers to a slow scan on CPU
        r_v = r_v * rates[..., i]
        head = head + r_v * jnp.clip(k - i, 0.0, 1.0)
    last = rates[..., -1]
    extra = jnp.maximum(k - v, 0.0)                        # positions past the measured ones
    tail = r_v * (tokens_per_step(last, extra) - 1.0)      # r_v (a + a^2 + ... + a^extra)
    return 1.0 + head + tail


def conditional_rates(position_rates):
    """vLLM's unconditional per-position acceptance r_i (the fraction of drafts whose position i was
    accepted) -> conditional rates a_i = r_i / r_{i-1}, r_0 = 1 (docs/model.md §4.3). Host-side floats."""
    out, prev = [], 1.0
    for r in position_rates:
        out.append(0.0 if prev == 0 else min(r / prev, 1.0))
        prev = r
    return out


def tree_widths(topk, tokens, depth, max_depth):
    """Candidates kept at each depth d = 1..max_depth of a draft tree of branching `topk` verifying
    `tokens` tokens per sequence (the root included: N - 1 draft candidates; SGLang's
    `speculative-num-draft-tokens`). The budget is spread over the `depth` levels as evenly as the tree
    allows: depth d keeps min(topk^d, ceil(remaining / levels left)). A chain (topk 1, N = k + 1) keeps 1
    per depth. Returns a tuple of `max_depth` arrays (0 beyond `depth`)."""
    remaining = tokens - 1.0
    out, power = [], 1.0
    for d in range(1, max_depth + 1):
        left = jnp.maximum(depth - d + 1.0, 1.0)
        power = power * topk  # topk^d as a product: exact, and no pow per depth
        w = jnp.minimum(power, jnp.ceil(remaining / left))
        w = jnp.where(d <= depth, jnp.maximum(w, 0.0), 0.0)
        out.append(w)
        remaining = remaining - w
    return tuple(out)


TREE_MAX_DEPTH = 16  # deepest draft tree the estimate covers (SGLang's defaults use 3-8 steps)


def tokens_per_tree_step(rates_at, topk, tokens, depth, max_depth=TREE_MAX_DEPTH):
    """Estimated tau of a draft tree (docs/model.md §4.4): depth d keeps w_d
    candidates (`tree_widths`) spread over the w_{d-1} nodes above it, so the accepted node at depth
    d - 1 has m_d = w_d / w_{d-1} candidate children on average (w_0 = 1). Depth d is reached when depth
    d - 1 was and one of them matches: p_d = 1 - (1 - a_d)^{m_d} for m_d >= 1 (independent draws), and
    m_d a_d for m_d < 1 (the chance that the node has a child at all, times its acceptance); tau = 1 +
    sum_d prod_{j<=d} p_j. `rates_at(d)` is the conditional acceptance at depth d (alpha, or a
    per-position vector). A chain (m_d = 1) gives a_d: exact. For wider trees it is optimistic: ranked
    candidates are not independent draws (the second-ranked token matches less often than the first).
    `max_depth` (static) levels are unrolled: depths beyond it are not counted."""
    widths = tree_widths(topk, tokens, depth, max_depth)
    tau, reach, above = 1.0, 1.0, 1.0
    logs = {}  # log(1 - a) once per distinct rate (i.i.d. alpha: one for every depth)
    for d, w in enumerate(widths, start=1):
        a = rates_at(d)
        if id(a) not in logs:
            safe = jnp.where(a < 1.0, 1.0 - a, 1.0)
            logs[id(a)] = (a, jnp.log(safe))  # keep `a` alive: ids are unique only while it lives
        m = w / jnp.maximum(above, 1.0)
        miss = jnp.where(a < 1.0, jnp.exp(jnp.maximum(m, 1.0) * logs[id(a)][1]), 0.0)
        p = jnp.where(m >= 1.0, jnp.where(m == 1.0, a, 1.0 - miss), m * a)
        reach = reach * jnp.where(w > 0, p, 0.0)
        tau = tau + reach
        above = w
    return tau


def alpha_from_tree_tokens(tau, topk, tokens, depth, iters=64):
    """The i.i.d. alpha whose tree estimate gives accepted length `tau` (increasing in alpha), by
    bisection: how a measured tree tau becomes an acceptance, as `alpha_from_tokens` for chains."""
    tau = jnp.asarray(tau)
    return bisect(lambda a: tokens_per_tree_step(lambda d: a, topk, tokens, depth) < tau,
                  jnp.zeros_like(tau), jnp.ones_like(tau), iters)


def max_tree_tau(topk, tokens, depth):
    """The longest accepted length the tree estimate gives a tree of this shape: its tau at alpha = 1.
    Below k + 1 where a depth keeps fewer candidates than the nodes above it (m_d < 1): a measured tau
    above it has no alpha that reproduces it, so it is refused, never clipped to it."""
    return tokens_per_tree_step(lambda d: 1.0, topk, tokens, depth)


def max_tree_tokens(topk, depth):
    """Largest `tree_tokens` a tree of branching topk and this depth can verify: 1 + sum_d topk^d (depth
    + 1 for a chain). Host numbers or traced arrays alike: products of whole numbers, exact (no pow),
    for depths up to `TREE_MAX_DEPTH`, the deepest tree the estimate covers (deeper ones are refused)."""
    total, power = 1.0, 1.0
    for d in range(1, TREE_MAX_DEPTH + 1):
        power = power * topk
        total = total + jnp.where(d <= depth, power, 0.0)
    return jnp.where(topk == 1, depth + 1.0, total)
