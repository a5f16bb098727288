"""Leave-one-source-out validation: the honest number to quote (MODEL.md 4 and 7).

For every source (publication) in the data: calibrate engine profiles on all the other sources (one
per engine with enough rows there, plus a pooled profile for engines the training sources lack) and
score the left-out source with them. No shipped preset is used, so no number has seen its own source.
Plain step-time rows (`inputs.steps`) are scored in their fold but never calibrate.
"""

import jax.numpy as jnp
import polars as pl

from ..inputs import engines
from . import calibrate, validate

MIN_ROWS = 8  # an engine needs this many supported training rows to get a profile of its own
POOLED = "*"  # key of the pooled profile in a profiles dict (`measured.engine_profile` falls back to it)


def fit_profiles(rows, steps=600, dtype=jnp.float32, progress=None):
    """Engine name -> calibrated `EngineProfile` for every engine with `MIN_ROWS` rows, plus `POOLED`.

    Hierarchical: a profile is fitted on every row first; each engine's fit starts from it and holds
    at its values what the engine's own rows do not identify. `POOLED`, for engines without rows of
    their own, keeps only its efficiencies (`engines.transferable`: overheads do not transfer)."""
    usable = [r for r in rows if not r.unsupported and not r.is_step]  # speedups calibrate; plain times are scored
    pooled = calibrate.fit(usable, name="pooled", holdout_fraction=0.0, steps=steps, dtype=dtype, progress=progress)
    profiles = {POOLED: engines.transferable(pooled.profile)}
    for engine in sorted({r.engine_name for r in usable}):
        sub = [r for r in usable if r.engine_name == engine]
        if len(sub) >= MIN_ROWS:
            try:
                profiles[engine] = calibrate.fit(sub, name=engine, holdout_fraction=0.0, steps=steps, dtype=dtype,
                                                 progress=progress, prior=pooled.values).profile
            except ValueError:  # nothing to fit for this engine alone: the pooled profile serves it
                pass
    return profiles


def leave_one_source_out(rows, steps=600, mode="operator", dtype=jnp.float32, progress=None):
    """Per-row table of every source scored by profiles fitted without it, and its summary
    (`validate.summarize`, plus `folds`: per left-out source, which profiles served it)."""
    sources = sorted({r.source for r in rows if not r.unsupported})
    frames, folds, fitted = [], {}, {}  # fitted: profiles per training set (a plain-only source's is everyone's)
    for s in sources:
        train = [r for r in rows if r.source != s]
        test = [r for r in rows if r.source == s]
        if not [r for r in train if not r.unsupported and not r.is_step]:
            continue
        key = frozenset(r.source for r in train if not r.unsupported and not r.is_step)
        if key not in fitted:
            fitted[key] = fit_profiles(train, steps, dtype, progress)
        profiles = fitted[key]
        df, summ = validate.evaluate(test, None, profiles, mode, dtype)
        frames.append(df)
        folds[s] = dict(median_ape=summ["median_ape"], rows_scored=summ["rows_scored"],
                        profiles={e: p.slug for e, p in profiles.items()})
        if "plain_steps" in summ:
            folds[s]["plain_steps_median_ape"] = summ["plain_steps"]["median_ape"]
    if not frames:
        raise ValueError("leave-one-source-out needs at least two sources with supported rows")
    df = pl.concat(frames, how="diagonal_relaxed")  # plain step-time rows add their own columns
    return df, dict(validate.summarize(df), folds=folds)
