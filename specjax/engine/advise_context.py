"""`advise` over several contexts: the batch x context table of the best k, the one batch table an engine
takes, and what that table loses against the 2-D advice, cell by cell.

`advise.grid` evaluates every (context, batch, k) in one jitted call. Per context the cells follow the 1-D
rule (`advise.choose`: the smallest k within `TIE` of the best, 0 where that best is below 1 + margin) up
to that context's admission limit; a cell is off because speculation does not pay there (`does_not_pay`)
or because the batch does not fit with the drafter at that context (`does_not_fit`), the words of
`advise.expected`. Neighbouring contexts with the same advice at every batch form one band.

No engine reads a (batch, context) table (`emit.CONTEXT_TABLE`), so the engine gets one batch table: per
batch, `advise.choose` over the mean speedup across the contexts at which that batch fits (a k that does
not fit at one of them is not a candidate), covering batches up to the shortest context's admission
limit. What the engine then runs (`emit.emit`'s `runs`, which may differ again from that table) is
compared with the 2-D advice in every cell: loss = S(context, batch, advised k) - S(context, batch, k the
engine runs), S = 1 at k = 0. A loss can be negative: where the 2-D advice is off because the best k pays
by less than the margin, the one table may still run a k that pays a little there.
"""

import numpy as np

from ..errors import SpecError
from . import advise, emit

FIT, PAY = "does_not_fit", "does_not_pay"


def check_contexts(contexts):
    """The contexts ascending; a repeated one is a one-line error."""
    from .. import catalogue

    seen = set()
    for c in contexts:
        catalogue.check("context", c, field="--context")
        if float(c) in seen:
            raise SpecError(f"--context {c:g} given twice; expected distinct contexts (one column each)")
        seen.add(float(c))
    return sorted(seen)


def cells(table, admission, margin, tie):
    """Per batch of one context's table (batches x k): (k, why off or None)."""
    k_of, _ = advise.choose(table, margin, tie)
    why = [None if k else PAY for k in k_of]
    for b in range(admission, len(table)):
        k_of[b], why[b] = 0, FIT
    return [int(k) for k in k_of], why


def ranges_of(ks, whys):
    """[[first, last, k], ...] with neighbours merged where both k and the reason it is off agree."""
    out = []
    for b, (k, why) in enumerate(zip(ks, whys), start=1):
        if out and out[-1][2] == k and out[-1][3] == why:
            out[-1][1] = b
        else:
            out.append([b, b, int(k), why])
    return out


def one_table(table, admission, margin, tie):
    """The one batch table for every context: (ranges [[first, last, k], ...] up to the largest admission limit,
    mean speedup table (batches x k) over the contexts where each batch fits)."""
    n = max(admission)
    fits = np.arange(n)[None, :] < np.asarray(admission)[:, None]  # (contexts, batches)
    sub = table[:, :n]
    with np.errstate(invalid="ignore"):
        total = np.where(fits[..., None], sub, 0.0).sum(axis=0)  # NaN where a k does not fit at a fitting context
    mean = total / fits.sum(axis=0)[:, None]
    k_of, _ = advise.choose(mean, margin, tie)
    return emit.merge([[b, b, int(k)] for b, k in enumerate(k_of, start=1)]), mean


def advise_over(scenario, contexts, max_num_seqs, k_max=8, margin=advise.MARGIN, dtype=None, tie=advise.TIE):
    """The 2-D advice of a scenario over `contexts` (`from_table` on `advise.grid`'s one jitted call)."""
    contexts = check_contexts(contexts)
    table, admission, _, k_max = advise.grid(scenario, contexts, max_num_seqs, k_max, dtype)
    if not max(admission):
        raise SpecError(f"the target and drafter do not fit in memory at batch {int(scenario.dp_attention)} at any "
                        f"k <= {k_max} at any context: nothing to advise")
    return from_table(contexts, table, admission, margin, tie)


def from_table(contexts, table, admission, margin=advise.MARGIN, tie=advise.TIE):
    """The 2-D advice from a speedup table (contexts x batches x k, NaN where it does not fit) and each context's
    admission limit: dict(contexts, table (cut at the largest admission limit), admission, k and why off per
    cell (contexts x batches), ranges (the one batch table), mean (its speedup table, batches x k))."""
    n = max(admission)  # the shortest context admits the most
    table = np.asarray(table, np.float64)[:, :n]
    ks, whys = zip(*(cells(t, a, margin, tie) for t, a in zip(table, admission)))
    ranges, mean = one_table(table, admission, margin, tie)
    return dict(contexts=list(contexts), table=table, admission=list(admission), k=np.asarray(ks), why=list(whys),
                ranges=ranges, mean=mean)


def bands(adv):
    """Neighbouring contexts with the same k and reason at every batch, as one band: [(first index, last index)]."""
    out = []
    for i in range(len(adv["contexts"])):
        if out and adv["k"][i].tolist() == adv["k"][out[-1][1]].tolist() and adv["why"][i] == adv["why"][out[-1][1]]:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def speedups(table, ks):
    """S at each batch of a (batches x k) table under k per batch (1 where k = 0)."""
    ks = np.asarray(ks)
    return np.where(ks > 0, table[np.arange(len(ks)), np.maximum(ks, 1) - 1], 1.0)


def loss(adv, runs):
    """What running `runs` ([[first, last, k], ...], what the engine drafts) loses against the 2-D advice in every
    cell that fits (batch <= both the context's admission limit and the runs' last batch):
    dict(worst (the cell of the largest loss), mean, cells, segments [per context, batches with one (advised k,
    k run): loss max and mean])."""
    k_run = np.asarray(emit.per_batch(runs))
    worst, total, count, segments = None, 0.0, 0, []
    for i, c in enumerate(adv["contexts"]):
        n = min(adv["admission"][i], len(k_run))
        if not n:
            continue
        t, k_adv = adv["table"][i, :n], adv["k"][i, :n]
        s_adv, s_run = speedups(t, k_adv), speedups(t, k_run[:n])
        d = s_adv - s_run
        total, count = total + float(np.sum(d)), count + n
        j = int(np.argmax(d))
        if worst is None or d[j] > worst["loss"]:
            worst = dict(context=c, batch=j + 1, k_advised=int(k_adv[j]), k_runs=int(k_run[j]),
                         speedup_advised=float(s_adv[j]), speedup_runs=float(s_run[j]), loss=float(d[j]))
        start = 0
        for b in range(1, n + 1):
            if b == n or (k_adv[b], k_run[b]) != (k_adv[start], k_run[start]):
                seg = d[start:b]
                segments.append(dict(context=c, batches=[start + 1, b], k_advised=int(k_adv[start]),
                                     k_runs=int(k_run[start]), loss_max=float(seg.max()), loss_mean=float(seg.mean())))
                start = b
    return dict(worst=worst, mean=total / count if count else 0.0, cells=count, segments=segments)


__all__ = ["FIT", "PAY", "check_contexts", "cells", "ranges_of", "one_table", "advise_over", "from_table", "bands",
           "speedups", "loss"]
