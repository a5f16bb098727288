"""Acceptance that varies by request (docs/model.md §10.1): the spread of per-request TPOT around its mean.

All requests of a batch share the iteration T; request i emits tau_i tokens per step, so its TPOT is
T / tau_i. The batch's tokens per step, which sets throughput and Little's law (each request needs
L_out / tau_i steps, so the mean steps per request is L_out E[1/tau]), is the harmonic mean
tau_H = 1 / E[1/tau_i] over requests, which is also what engines count (accepted / drafts over all
steps weights each request by its steps). The scenario's acceptance is that aggregate: the spread
changes no mean, only how TPOT is spread over requests (mean TPOT = T E[1/tau_i] = T / tau_H).

Per-request acceptance: each conditional rate a_j of the scenario (alpha, or the per-position vector)
has its log-odds moved by one per-request amount, logit a_ij = logit a_j + delta + sigma z_i,
z_i ~ N(0, 1) (a logit-normal random effect: a request is easier or harder for the drafter at every
position alike), with the location delta solved so that the harmonic mean of tau(a_i) is the
scenario's tau. tau increases with z, so the p-quantile of TPOT_i is T / tau(delta - sigma Phi^-1(p)):
quantiles of z mapped through the monotone tau, no sampling. E[1/tau] is a midpoint rule over
`N_QUAD` equal-probability cells of z. Per-request samples (`sample_inverse_quantiles`) give the
quantiles of 1/tau_i directly. Pure and jittable functions of one `Decode`.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from ._search import bisect
from .precision import float_dtype
from .speculative import tokens_per_tree_or_chain

N_QUAD = 1024        # equal-probability cells of z for E[1/tau] and E[tau]
SHIFT_SPAN = 60.0    # the location delta is searched on [-SHIFT_SPAN, SHIFT_SPAN] (log-odds)
PERCENTILES = (50.0, 90.0, 99.0)  # the TPOT percentiles `serve` reports


def solve_steps(dtype):
    """Halvings of [-SHIFT_SPAN, SHIFT_SPAN] that reach the dtype's resolution."""
    return 40 if jnp.finfo(dtype).bits <= 32 else 60


def shifted(dec, s):
    """`dec` with the log-odds of every conditional rate (alpha, and the vector where given) moved by `s`
    (0 stays 0, 1 stays 1: a position that always or never accepts does so for every request)."""
    def move(a):
        a = jnp.asarray(a)
        return jax.nn.sigmoid(jnp.log(a) - jnp.log1p(-a) + s)

    return dec.replace(alpha=move(dec.alpha), rates=None if dec.rates is None else move(dec.rates))


def tau_at(dec, s):
    """tau of a request whose rates are the scenario's moved by `s` in log-odds (a chain, a vector, a tree)."""
    return tokens_per_tree_or_chain(shifted(dec, s))


class Spread(NamedTuple):
    """The per-request distribution of one operating point (dimensionless)."""

    tpot_factors: object     # (n,) TPOT at each percentile / mean TPOT (1 where the spread is 0)
    shift: float             # delta (log-odds; 0 without a spread)
    tau_harmonic: float      # 1 / E[1/tau_i]: the batch's tokens per step (the scenario's tau)
    tau_mean: float          # E[tau_i]: the mean over requests of their accepted lengths (>= tau_harmonic)


def quad_nodes(dtype, n=N_QUAD):
    """z at the midpoints of n equal-probability cells: Phi^-1((i + 1/2) / n)."""
    return ndtri((jnp.arange(n, dtype=dtype) + 0.5) / n)


def spread(dec, sigma, percentiles):
    """The `Spread` of per-request acceptance with log-odds spread `sigma` (>= 0) around the scenario's,
    at `percentiles` (an array in (0, 100); NaN: the mean, factor 1).

    delta solves E_z[1/tau(delta + sigma z)] = 1/tau_0 (decreasing in delta: bisection); the TPOT
    p-quantile over requests is T / tau(delta - sigma Phi^-1(p / 100)), so its factor over the mean
    TPOT T / tau_0 is tau_0 / tau(delta - sigma Phi^-1(p / 100)). sigma = 0 gives factors of exactly 1."""
    dtype = float_dtype(dec.alpha)
    sigma = jnp.asarray(sigma, dtype)
    p = jnp.asarray(percentiles, dtype)
    tau0 = tokens_per_tree_or_chain(dec)
    z = quad_nodes(dtype)
    taus = jax.vmap(lambda d: tau_at(dec, d))  # over shifts

    def inv_mean(d):
        return jnp.mean(1.0 / taus(d + sigma * z))

    span = jnp.asarray(SHIFT_SPAN, dtype)
    delta = bisect(lambda d: inv_mean(d) > 1.0 / tau0, -span, span, solve_steps(dtype))
    on = sigma > 0
    delta = jnp.where(on, delta, 0.0)
    at_p = taus(delta - sigma * ndtri(jnp.where(jnp.isnan(p), 50.0, p) / 100.0))
    factors = jnp.where(on & ~jnp.isnan(p), tau0 / at_p, 1.0)
    mean = jnp.where(on, jnp.mean(taus(delta + sigma * z)), tau0)
    return Spread(tpot_factors=factors, shift=delta, tau_harmonic=tau0, tau_mean=mean)


def sample_spread(dec, inverse_quantiles, tau_harmonic, tau_mean):
    """The `Spread` of measured per-request samples: `inverse_quantiles` are the quantiles of 1/tau_i
    at the percentiles (NaN: the mean), computed from the samples (`sample_inverse_quantiles`);
    the factor is tau_0 x quantile, tau_0 the scenario's tau (the samples' harmonic mean)."""
    tau0 = tokens_per_tree_or_chain(dec)
    q = jnp.asarray(inverse_quantiles, tau0.dtype)
    return Spread(tpot_factors=jnp.where(jnp.isnan(q), 1.0, tau0 * q), shift=jnp.zeros_like(tau0),
                  tau_harmonic=jnp.asarray(tau_harmonic, tau0.dtype), tau_mean=jnp.asarray(tau_mean, tau0.dtype))


def sample_inverse_quantiles(taus, percentiles):
    """Quantiles of 1/tau_i over per-request samples at `percentiles` (linear interpolation between order
    statistics, numpy's default; NaN percentile: NaN), the samples' harmonic mean 1 / mean(1/tau_i) and
    their arithmetic mean."""
    taus = jnp.asarray(taus)
    p = jnp.asarray(percentiles, taus.dtype)
    inv = 1.0 / taus
    q = jnp.quantile(inv, jnp.where(jnp.isnan(p), 50.0, p) / 100.0)
    return jnp.where(jnp.isnan(p), jnp.nan, q), 1.0 / jnp.mean(inv), jnp.mean(taus)


def of_load(dec, percentiles, samples):
    """The `Spread` of an operating point with a serving load: from measured `samples` (`sample_inverse_quantiles`'
    three results at the same percentiles) where their harmonic mean is a number, else parametric with the load's
    `acceptance_spread` (`no_samples`: both paths in one program, so that each entry point compiles once)."""
    measured = sample_spread(dec, *samples)
    parametric = spread(dec, dec.load.acceptance_spread, percentiles)
    use = jnp.isfinite(measured.tau_harmonic)
    return Spread(*(jnp.where(use, a, b) for a, b in zip(measured, parametric)))


def no_samples(n, dtype):
    """The `samples` argument of `of_load` without samples (NaN: the parametric spread is used)."""
    nan = jnp.full((), jnp.nan, dtype)
    return jnp.full((n,), jnp.nan, dtype), nan, nan
