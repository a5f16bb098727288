"""From the model's best draft length per batch to an engine's own speculative configuration.

`schedule` evaluates every integer batch per engine rank 1..max_num_seqs (under DP attention with d ranks
the replica runs d x that batch: engines count batches per rank) at every k in 1..k_max (the step kernel,
vmapped: exact, no search) and stops at the admission limit, the largest batch that fits in memory with
the drafter. Per batch it keeps the smallest k whose speedup is within a relative `TIE` of the best (float32
ties do not make k flap between ranges) where that speedup is at least 1 + margin (else k = 0: speculation
off; the margin keeps a threshold clear of the batch where the speedup crosses 1, where users see the
engine flap between on and off), and merges equal neighbours into ranges [first, last, k]. `emit.emit`
writes them as the configuration an engine version reads as meant. A DFlash drafter's k is searched up to
its config's block_size - 1 (the block holds the last verified token and the drafts; `api.block_k`).
`grid` is the evaluation itself, over several contexts in the same jitted call (`schedule` takes its one
context; `advise_context` builds the batch x context advice on it).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .. import store
from ..cost.speculative import step
from ..cost.status import Point
from ..errors import SpecError

EMIT = ("vllm", "sglang", "trtllm")
MARGIN = 0.03
TIE = 1e-3  # relative: a larger k must beat a smaller one by more than this to be chosen


@store.jit(static_argnames=("k_max",))
def _grid(hw, deploy, tgt, draft, dec, contexts, batches, k_max):
    """Speedup at every (context, batch, k) of the grid (NaN where it does not fit): one jitted call, vmapped
    over the three axes."""
    ks = jnp.arange(1, k_max + 1, dtype=dec.alpha.dtype)

    def at(c, b, k):
        r = step(hw, deploy, tgt, draft, dec.replace(batch=b, k=k, context=c))
        return jnp.where(r.status == int(Point.OK), r.speedup, jnp.nan)

    over_k = jax.vmap(at, in_axes=(None, None, 0))
    over_bk = jax.vmap(lambda c, b: over_k(c, b, ks), in_axes=(None, 0))
    return jax.vmap(lambda c: over_bk(c, batches))(contexts)


def choose(table, margin=MARGIN, tie=TIE):
    """k per batch from a (batches x k) speedup table (NaN: does not fit): the smallest k within a relative
    `tie` of the best, 0 where that best is below 1 + margin; and the best speedup per batch."""
    filled = np.where(np.isnan(table), -np.inf, table)
    top = filled.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        near = filled >= np.where(top > 0, top / (1.0 + tie), top)
    best_k = np.argmax(near, axis=1) + 1
    best = filled[np.arange(len(table)), best_k - 1]
    return np.where(best >= 1.0 + margin, best_k, 0), best


def grid(scenario, contexts, max_num_seqs, k_max=8, dtype=None):
    """(speedup table (contexts x batches x k, NaN where it does not fit, and at every batch from a context's
    admission limit on), admission limit per context, batches per engine rank, k_max as searched): every
    integer batch per engine rank 1..max_num_seqs at every k in 1..k_max and every context, in one jitted
    call. A context's admission limit is the largest batch per rank that fits with the drafter at some k
    (0: not even batch 1 fits); each context is checked as the scenario's own (`Scenario.check`)."""
    if scenario.tree_topk is not None:
        raise SpecError("advise schedules chain draft lengths; drop --tree-topk/--tree-tokens")
    from ..api import block_k

    for c in contexts:  # a context past the model's positions is refused as `--context` would be
        dataclasses.replace(scenario, context=float(c)).check()
    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    k_max = min(k_max, block_k(scenario) or k_max)  # a DFlash drafter: at most its block less one
    ranks = int(scenario.dp_attention)
    per_rank = np.arange(1, int(max_num_seqs) + 1)
    dt = np.asarray(dec.alpha).dtype
    table = np.asarray(_grid(hw, deploy, tgt, draft, dec, np.asarray(contexts, dt), (per_rank * ranks).astype(dt),
                             int(k_max)), np.float64)
    fits = ~np.isnan(table).all(axis=2)  # (contexts, batches)
    admission = np.where(fits.all(axis=1), fits.shape[1], np.argmin(fits, axis=1))
    table[np.arange(table.shape[1])[None, :] >= admission[:, None]] = np.nan
    return table, [int(a) for a in admission], per_rank, int(k_max)


def schedule(scenario, max_num_seqs, k_max=8, margin=MARGIN, dtype=None, tie=TIE):
    """(ranges [[first, last, k], ...] per engine rank up to the admission limit, speedup table (batches x k),
    best speedup per batch) at the scenario's context. The admission limit is ranges[-1][1]: the largest batch
    per rank, at most max_num_seqs, that fits with the drafter at some k."""
    tables, (admission,), per_rank, k_max = grid(scenario, [scenario.context], max_num_seqs, k_max, dtype)
    if not admission:
        raise SpecError(f"the target and drafter do not fit in memory at batch {int(scenario.dp_attention)} at any "
                        f"k <= {k_max}: nothing to advise")
    table = tables[0, :admission]
    k_of, best = choose(table, margin, tie)
    ranges = _merge([[int(b), int(b), int(k)] for b, k in zip(per_rank[:admission], k_of)])
    return ranges, table, np.where(np.isfinite(best), best, np.nan)


def _merge(ranges):
    """Neighbouring ranges with the same k as one."""
    out = []
    for first, last, k in ranges:
        if out and out[-1][2] == k:
            out[-1][1] = last
        else:
            out.append([first, last, k])
    return out


def expected(ranges, table):
    """Per range: its k, the model's speedup at both ends and its minimum (1 where k = 0), and why a range
    is off (`does_not_pay`, or `does_not_fit`: the batch does not fit in memory with the drafter at any k)."""
    out = []
    for first, last, k in ranges:
        s = table[first - 1:last, k - 1] if k else np.ones(last - first + 1)
        why = None if k else ("does_not_fit" if np.isnan(table[first - 1]).all() else "does_not_pay")
        out.append(dict(batches=[first, last], k=k, speedup_min=float(np.nanmin(s)), speedup_first=float(s[0]),
                        speedup_last=float(s[-1]), off_because=why))
    return out


def emit(engine, scenario, ranges, table, margin=MARGIN, version=None, draft_id=None):
    """The engine's configuration for the ranges (`emit.emit`)."""
    from . import emit as _emit

    return _emit.emit(engine, scenario, ranges, table, margin, version, draft_id)


def _method(scenario, engine):
    from . import emit as _emit

    return _emit.method(scenario, engine)


def speedup_at(table, batch, k):
    """The model's speedup at an integer batch and k (1.0 at k = 0), from the schedule's table."""
    return 1.0 if k == 0 else float(table[int(batch) - 1, k - 1])


__all__ = ["EMIT", "MARGIN", "TIE", "choose", "grid", "schedule", "expected", "emit", "speedup_at"]
