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
