"""Crossover of the speedup curve S(B) = 1 (docs/model.md §7).

S need not be monotone in B (an MoE target verifying k+1 tokens per sequence touches more experts at
small batch, so S can start below 1 or dip below 1 and recover; long contexts can make it rise again),
so the curve is searched on [1, batch_bound] for every sign change of S - 1 (`_search.sign_changes`:
log grid, extrema inside a grid step refined, crossings located in log B by halvings then Illinois
steps, `root_steps`). Reported:

- `crossover_batch` = B_off, the switch-off batch: the last crossing from S >= 1 to S < 1 below the
  bound, beyond which speculation never pays again (NaN if S >= 1 at the bound, or never >= 1);
- `first_crossing_batch`: the first batch with S < 1 (1 if S(1) < 1);
- the dips: intervals [from, to] below B_off where S < 1 (`n_dips`, and their ends with `max_dips`);
- `pays_from` / `pays_to` for `hurts_at_small_batch` curves: from the first batch where S >= 1 to
  B_off (or the bound);
- a `status.Curve`, the memory-feasible batch with the drafter and whether B_off exceeds it, the
  bound and how many points were sampled.
Pure and vmappable.
"""

from typing import NamedTuple

import jax.numpy as jnp

from ..cost._search import sign_changes
from ..cost.precision import float_dtype
from ..cost.speculative import step
from ..cost.status import Curve, code
from .nograd import no_gradient

N_GRID = 96        # log-grid points on [1, batch bound] (default)
N_REFINE = 2       # discrete local extrema refined (dips narrower than a grid step found per curve)
ROOT_STEPS_32 = (10, 3)  # (halvings, Illinois steps) per crossing in float32 (`root_steps`)
ROOT_STEPS_64 = (12, 6)  # ... and in float64


class Crossover(NamedTuple):
    crossover_batch: float        # B_off (NaN unless S < 1 at the bound after paying somewhere)
    crossover_batch_int: float    # ceil(B_off)
    first_crossing_batch: float   # first batch with S < 1 (NaN if S >= 1 throughout)
    pays_from: float              # hurts_at_small_batch: first batch with S >= 1 (NaN otherwise)
    pays_to: float                # ... and where paying ends: B_off, or the bound
    n_dips: float                 # intervals with S < 1 below B_off
    status: int                   # a `status.Curve` code (int8)
    speedup_at_batch_1: float
    max_batch_sd: float           # largest batch that fits with the drafter
    beyond_memory: float          # 1.0 if B_off exceeds `max_batch_sd`
    speedup_at_max_batch: float   # S at the largest batch that fits with the drafter (NaN if none fits)
    batch_bound: float            # upper end of the search
    grid_points: float            # points sampled (log grid + refined extrema)
    dips_from: jnp.ndarray        # (max_dips,) dip starts, NaN padded
    dips_to: jnp.ndarray          # (max_dips,) dip ends


def bisect_steps(dtype):
    """Halvings of one log-grid step (at most ~0.12 in log B) that reach the dtype's resolution."""
    return 28 if jnp.finfo(dtype).bits <= 32 else 40


def root_steps(dtype):
    """(halvings, Illinois steps) per crossing (`_search.illinois`, from the samples on either side of it):
    13 evaluations in float32 instead of 28 halvings. A smooth crossing reaches the dtype's resolution; one
    at a kink or a jump of S is within the bracket the halvings leave (a grid step / 1024: 1.2e-4 in log B
    at the default bound, so B within 6e-5 relative). Measured against 28 halvings on 24,160 float32 rows
    (bench/README.md): 4.0e-5 relative at most, median 5e-7, identical statuses and dip counts."""
    return ROOT_STEPS_32 if jnp.finfo(dtype).bits <= 32 else ROOT_STEPS_64


def speedup_at(hw, deploy, target, draft, dec, batch):
    """S at a (real) batch, other inputs as in `dec`."""
    return step(hw, deploy, target, draft, dec.replace(batch=batch)).speedup


class Below(NamedTuple):
    """Where a curve is below 1, as `curve_status` reads it (a `SignChanges` has the same flags)."""

    below_first: bool
    below_last: bool
    any_below: bool
    all_below: bool


def below(samples_below):
    """`Below` of a sampled curve: `samples_below` (bool, in order of batch or rate) says where S < 1."""
    b = jnp.asarray(samples_below)
    return Below(below_first=b[0], below_last=b[-1], any_below=b.any(), all_below=b.all())


def curve_status(c):
    """The `status.Curve` code of a `SignChanges` of S - 1 (or of the `Below` of a sampled curve)."""
    return jnp.where(c.all_below, code(Curve.NEVER_HELPS),
                     jnp.where(~c.any_below, code(Curve.HELPS_THROUGHOUT),
                               jnp.where(c.below_first, code(Curve.HURTS_AT_SMALL_BATCH),
                                         jnp.where(c.below_last, code(Curve.STOPS_PAYING),
                                                   code(Curve.HELPS_WITH_DIPS)))))


def unless_unfit(status, cap_sd):
    """A curve's status, or `Curve.SD_DOES_NOT_FIT` where speculation cannot hold one sequence (its batch cap
    `cap_sd` < 1: a prompt whose KV cache does not fit beside the weights and the drafter), never a curve
    status such as `never_helps` read off a curve that was never evaluated; NaN: `invalid_input`."""
    return jnp.where(jnp.isnan(cap_sd), code(Curve.INVALID_INPUT),
                     jnp.where(cap_sd >= 1.0, status, code(Curve.SD_DOES_NOT_FIT)))


_GUARD = no_gradient("crossover.find", "specjax.search.sensitivity.crossover_sensitivity (api.sensitivity, "
                     "`specjax sensitivity`): dB_off/dinput by the implicit function theorem")


def find(hw, deploy, target, draft, dec, batch_max=65536.0, n_grid=N_GRID, n_bisect=None, max_dips=0):
    """Search S(B) on [1, batch_max]. `dec.batch` is ignored.

    Not differentiable: B_off is located by comparisons (a sign test per sample, bisection), so a
    gradient through this function would be a silent zero; `jax.grad` (or any derivative) of it raises
    `errors.NotDifferentiable` naming `sensitivity.crossover_sensitivity`, which gives dB_off/dinput by the
    implicit function theorem.

    Args:
      hw, deploy, target, draft, dec: as in `speculative.step`.
      batch_max: the batch bound (sequences). n_grid: log-grid points; n_bisect: if given, each crossing is
        bisected with that many halvings (28 reach float32's resolution, 40 float64's) instead of the default
        halvings-then-Illinois steps of `root_steps`;
      max_dips: how many dips to locate exactly (static; the count `n_dips` is always exact).

    Returns:
      `Crossover`.
    """
    hw, deploy, target, draft, dec = _GUARD((hw, deploy, target, draft, dec))
    dtype = float_dtype(dec.alpha)
    n_root = None if n_bisect else root_steps(dtype)
    c = sign_changes(lambda b: step(hw, deploy, target, draft, dec.replace(batch=b)), lambda r: r.speedup - 1.0,
                     batch_max, n_grid, n_bisect or bisect_steps(dtype), dtype, n_refine=N_REFINE,
                     max_dips=max_dips, batched=max_dips > 0,  # one curve with its dips (the CLI): trace it once
                     n_root=n_root, first_up_if_below=True)  # `pays_from` reads it only where S(1) < 1
    s1, mb_sd = c.outputs.speedup[0], c.outputs.max_batch_sd[0]
    status = curve_status(c)
    b_off = c.last_down
    bound = jnp.asarray(batch_max, dtype)
    hurts = status == code(Curve.HURTS_AT_SMALL_BATCH)
    nan = jnp.asarray(jnp.nan, dtype)
    b_fit = jnp.clip(jnp.minimum(mb_sd, bound), 1.0, None)
    s_fit = jnp.where(mb_sd >= 1, speedup_at(hw, deploy, target, draft, dec, b_fit), nan)
    return Crossover(crossover_batch=b_off, crossover_batch_int=jnp.ceil(b_off),
                     first_crossing_batch=c.first_below, pays_from=jnp.where(hurts, c.first_up, nan),
                     pays_to=jnp.where(hurts, jnp.where(jnp.isfinite(b_off), b_off, bound), nan),
                     n_dips=c.n_up.astype(dtype), status=status, speedup_at_batch_1=s1, max_batch_sd=mb_sd,
                     beyond_memory=(jnp.isfinite(b_off) & (b_off > mb_sd)).astype(dtype), speedup_at_max_batch=s_fit,
                     batch_bound=bound, grid_points=jnp.asarray(c.samples, dtype),
                     dips_from=c.dips_from, dips_to=c.dips_to)
