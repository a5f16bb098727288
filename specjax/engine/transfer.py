"""Leave-one-source-out validation: the honest number to quote (docs/model.md §12 and §13).

For every source (publication) in the data: calibrate engine profiles on all the other sources (one
per engine with enough rows there, plus a pooled profile for engines the training sources lack) and
score the left-out source with them. No shipped preset is used, so no number has seen its own source.
Plain step-time rows under load (`inputs.steps`) calibrate and are scored like speedup rows.
"""

import dataclasses

import jax
import jax.numpy as jnp
import polars as pl

from .. import catalogue, store
from ..inputs import engines, hardware
from ..errors import SpecError
from . import calibrate, validate

MIN_ROWS = 8  # an engine needs this many supported training rows to get a profile of its own
MIN_SECTION_ROWS = 6  # rows of an engine on one GPU that earn a [hardware.<slug>] section (`minority_hardware`)
ROUNDS = 2  # `fit_engine`'s alternations: base, sections, then the overheads on every row and sections again
POOLED = "*"  # key of the pooled profile in a profiles dict (`measured.engine_profile` falls back to it)


# what a GPU section fits: how the engine's kernels run on that silicon (efficiencies, per-token traffic); the
# host-side overheads are the engine's software, the same on every GPU, and stay the engine's
SECTION_FIELDS = tuple(n for n in calibrate.FIELDS if catalogue.ENGINE[n].engine in ("efficiency", "per_token"))
OVERHEAD_FIELDS = tuple(n for n in calibrate.FIELDS if n not in SECTION_FIELDS)


def minority_hardware(rows):
    """GPUs with a section of their own in an engine's profile: hardware presets with at least
    `MIN_SECTION_ROWS` of the engine's rows but fewer than half of them. Engine terms are properties of an
    engine on a GPU (docs/model.md §2.6): vLLM's MI300X rows (mxfp4 experts without FP4 hardware) would otherwise
    set the per-token cost vLLM is predicted with on every NVIDIA GPU. Rows on a user's hardware file stay
    in the engine's base fit: a `[hardware.<slug>]` table exists only for a preset (an engine TOML refuses
    any other), and a table keyed by the file's path would never be looked up (profiles apply by the
    hardware's slug, the file's stem)."""
    presets = set(hardware.preset_slugs())
    counts = {}
    for r in rows:
        counts[r.hardware] = counts.get(r.hardware, 0) + 1
    return sorted(h for h, c in counts.items() if h in presets and MIN_SECTION_ROWS <= c < len(rows) / 2)


def in_sections(rows):
    """True per row that belongs to a GPU section of its engine (`minority_hardware` of the engine's rows):
    such rows fit their section, not the engine's base nor the pooled profile."""
    minority = {}
    for e in {r.engine_name for r in rows}:
        minority[e] = set(minority_hardware([r for r in rows if r.engine_name == e]))
    return [r.hardware in minority[r.engine_name] for r in rows]


def fit_section(rows, name, prior, steps=600, dtype=jnp.float32, progress=None):
    """A GPU section's `Calibration` on that GPU's rows (`SECTION_FIELDS`, the rest held at `prior`), or None
    where its rows identify nothing. Where all the section's terms together leave too few residuals to bound
    any error (vLLM's six MI300X rows for six terms), each term is tried alone and the identified one that
    fits best is kept (one step of forward selection): a few rows identify one term, not none."""
    def one(fields):
        try:
            return calibrate.fit(rows, name=name, holdout_fraction=0.0, steps=steps, dtype=dtype, progress=progress,
                                 prior=prior, fields=fields)
        except SpecError:
            return None
    cal = one(SECTION_FIELDS)
    if cal is not None:
        return cal
    alone = [c for c in map(one, ((f,) for f in SECTION_FIELDS)) if c is not None]
    return min(alone, key=lambda c: float(c.loss_history[-1]), default=None)


def section_terms(sections):
    """Hardware slug -> {term: value} of what each section's rows identified (a profile's `[hardware.<slug>]`)."""
    return {h: {n: cal.values[n] for n in cal.identified} for h, cal in sections.items() if cal.identified}


def _merged(first, joint):
    """The base `Calibration` after a joint round: the overheads as `joint` fitted them on every row, the rest as
    `first` fitted them (identified, held, errors) on the other GPUs' rows."""
    identified = tuple(n for n in calibrate.FIELDS if n in first.identified and n not in OVERHEAD_FIELDS
                       or n in joint.identified)
    fitted = tuple(n for n in calibrate.FIELDS if n in first.profile.fitted and n not in OVERHEAD_FIELDS
                   or n in joint.profile.fitted)
    profile = dataclasses.replace(joint.profile, fitted=fitted)
    return dataclasses.replace(
        joint, profile=profile, identified=identified, held=tuple(n for n in calibrate.FIELDS if n not in fitted),
        not_identified=tuple(n for n in fitted if n not in identified),
        std_errors={**first.std_errors, **{n: joint.std_errors[n] for n in OVERHEAD_FIELDS if n in joint.std_errors}})


def fit_engine(rows, name, prior=None, steps=600, dtype=jnp.float32, progress=None, rounds=ROUNDS):
    """An engine's `Calibration` and one per `minority_hardware` GPU (`fit_section`): (base, {slug: Calibration}).

    The base is fitted first on the rows outside the minority GPUs, then each section on its GPU's rows
    starting from the base's values; then, `rounds` - 1 times, the overheads again on every row (the rest held
    at the base's values, a section's rows predicted with the terms their section identified: `gpu_terms`),
    and the sections again. So a GPU with a section of its own still informs the engine's overheads, which are
    its software and the same on every GPU (vLLM's MI300X rows, with gpt-oss's 36 layers and 435 kernels,
    weigh a per-layer cost against a per-kernel one that its 8B rows on H100 cannot), and nothing else: how
    kernels run on that silicon is the section's to say."""
    minority = minority_hardware(rows)
    base = calibrate.fit([r for r in rows if r.hardware not in minority], name=name, holdout_fraction=0.0,
                         steps=steps, dtype=dtype, progress=progress, prior=prior)
    sections = {}
    for i in range(rounds if minority else 1):
        if i:
            try:
                joint = calibrate.fit(rows, name=name, holdout_fraction=0.0, steps=steps, dtype=dtype,
                                      progress=progress, prior=base.values, fields=OVERHEAD_FIELDS,
                                      gpu_terms=section_terms(sections))
            except SpecError:  # every row together identifies no overhead: the first fit stands
                break
            base = _merged(base, joint)
        sections = {}
        for h in minority:
            cal = fit_section([r for r in rows if r.hardware == h], f"{name} on {h}", base.values, steps, dtype,
                              progress)
            if cal is not None:  # a GPU whose rows identify nothing keeps the engine's values (no section)
                sections[h] = cal
    return base, sections


def with_sections(profile, sections):
    """`profile` with a `[hardware.<slug>]` table per section: the terms that GPU's rows identified."""
    return dataclasses.replace(profile, per_hardware={**profile.per_hardware, **section_terms(sections)})


def fit_profiles(rows, steps=600, dtype=jnp.float32, progress=None):
    """Engine name -> calibrated `EngineProfile` for every engine with `MIN_ROWS` rows, plus `POOLED`.

    Hierarchical: a profile is fitted on every row first (but the GPU sections' rows); each engine's fit
    starts from it and holds at its values what the engine's own rows do not identify (`fit_engine`, with
    GPU sections). `POOLED`, for engines without rows of their own, keeps its efficiencies and per-token
    terms (`engines.transferable`: overheads do not transfer)."""
    usable = [r for r in rows if not r.unsupported]
    common = [r for r, sec in zip(usable, in_sections(usable)) if not sec]
    pooled = calibrate.fit(common, name="pooled", holdout_fraction=0.0, steps=steps, dtype=dtype, progress=progress)
    profiles = {POOLED: engines.transferable(pooled.profile)}
    for engine in sorted({r.engine_name for r in usable}):
        sub = [r for r in usable if r.engine_name == engine]
        if len(sub) >= MIN_ROWS:
            try:
                base, sections = fit_engine(sub, engine, pooled.values, steps, dtype, progress)
                profiles[engine] = with_sections(base.profile, sections)
            except ValueError:  # nothing to fit for this engine alone: the pooled profile serves it
                pass
    return profiles


def leave_one_source_out(rows, steps=600, mode="operator", dtype=jnp.float32, progress=None):
    """Per-row table of every source scored by profiles fitted without it, and its summary
    (`validate.summarize`, plus `folds`: per left-out source, which profiles served it)."""
    sources = sorted({r.source for r in rows if not r.unsupported})
    frames, folds, fitted = [], {}, {}  # fitted: profiles per training set
    for s in sources:
        train = [r for r in rows if r.source != s]
        test = [r for r in rows if r.source == s]
        if not [r for r in train if not r.unsupported]:
            continue
        key = frozenset(r.source for r in train if not r.unsupported)
        if key not in fitted:
            fitted[key] = fit_profiles(train, steps, dtype, progress)
        profiles = fitted[key]
        df, summ = validate.evaluate(test, None, profiles, mode, dtype)
        frames.append(df)
        folds[s] = dict(median_ape=summ["median_ape"], rows_scored=summ["rows_scored"],
                        profiles={e: p.slug for e, p in profiles.items()})
        if "plain_steps" in summ:
            folds[s]["plain_steps_median_ape"] = summ["plain_steps"]["median_ape"]
        # every fold compiles its fits and predictions anew (row counts are shapes); without this the kept
        # executables exhaust the process's memory mappings (vm.max_map_count, 65,530) after about 30 min
        # of a four-file run and LLVM aborts the process ("Unable to allocate section memory")
        jax.clear_caches()
        store.forget()  # and the programs the store keeps in memory (the stored files stay)
    if not frames:
        raise ValueError("leave-one-source-out needs at least two sources with supported rows")
    df = pl.concat(frames, how="diagonal_relaxed")  # plain step-time rows add their own columns
    return df, dict(validate.summarize(df), folds=folds)
