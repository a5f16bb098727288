"""Fit an engine profile to measurements (docs/model.md §12).

Parameters: the engine terms of the input catalogue that have fitting bounds (`catalogue.ENGINE` rows
with `fit`: eta_F, eta_W, T_pass_fixed, t_layer, t_kernel, T_draft_fixed, T_step_fixed, sigma today),
one set shared by every training row, each squashed into its catalogue `fit` bounds by a sigmoid.
Acceptance is the row's where given; otherwise one alpha per acceptance group, the one that matches the
group's anchor row (as `validate` does; differentiable by the implicit function theorem). Loss: mean
squared log error of the non-anchor speedups (at a batch, a rate or a concurrency, each by the model of its
load, `validate.load_ratio`) plus, where a row has them, of the measured step times
(`t_base_s`, `t_sd_step_s`), each source weighted equally, minimised by optax's Adam (`scale_by_adam`)
with a cosine-decayed step size. The bounds are physical: decode kernels reach 70-100% of HBM bandwidth
and 30-100% of peak FLOP/s, so what the roofline misses beyond that must be overhead.

Identifiability. A speedup is a ratio of times: scaling eta_F and eta_W by s and every overhead by
1/s leaves every speedup unchanged, so without step times eta_W is held (at `hbm_efficiency`). After a
first fit, the Jacobian of the residuals in bound-normalised coordinates gives each parameter's standard
error (Gauss-Newton: cov = s^2 (J^T J)^-1); a parameter is identified when its error is below a
quarter of its value (or of 2% of its range, for values near 0). The least identified parameter is
held at `PRIORS` (or at a given prior profile) and the rest refitted, until every fitted parameter is
identified, unless holding it raises the loss beyond noise (`needed`, an F test): then the next least
identified one is tried, and where every poorly identified term is needed, they stay fitted with their
errors and are reported as not identified. With no more residuals than fitted terms no error is bounded
(every term is unidentified) and no term is shown to be needed; a residual below `NOISE_FLOOR` is not
believed exact. A fit that identifies nothing is refused (a profile of priors is not a calibration).
`Calibration` reports the lists, the errors and the condition number of J^T J.
"""

import dataclasses
import functools
import sys
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import catalogue
from ..cost.speculative import step
from ..errors import SpecError
from ..inputs import engines, measured, steps
from . import validate

FIELDS = tuple(n for n in catalogue.ENGINE if n in catalogue.FIT)  # the engine terms with fitting bounds
BOUNDS = {n: catalogue.FIT[n].fit for n in FIELDS}  # physical bounds of each calibrated parameter



def _in_bounds(name, v):
    lo, hi = BOUNDS[name]
    return min(max(float(v), lo), hi)


def at_bound(name, v, tol=1e-3):
    """True where `v` sits within `tol` of the fit's width from a plausibility bound of `name`: a fitting bound
    inside the term's own range (eta_P's 0.2, eta_F's 0.3, 100 activation vectors), not a limit of its
    definition (no overhead or traffic below 0, no efficiency above 1, non_overlap's 0 and 1), which is a value
    the data may well want."""
    lo, hi = BOUNDS[name]
    row = catalogue.FIT[name]
    width = tol * (hi - lo)
    return (lo > row.lo and v - lo <= width) or (hi < row.hi and hi - v <= width)


def _prior(row):
    """Held when not identified: the row's prior, else the pure roofline's value (no overhead), in bounds."""
    return row.prior if row.prior is not None else _in_bounds(row.name, engines.DEFAULTS.get(row.name, row.fit[0]))


PRIORS = {n: _prior(catalogue.FIT[n]) for n in FIELDS}
# where the fit starts: the row's start, else the middle of the bounds (0 in the sigmoid's coordinate)
START = {n: catalogue.FIT[n].start if catalogue.FIT[n].start is not None else 0.5 * sum(BOUNDS[n]) for n in FIELDS}
SERVING_ONLY = ("prefill_efficiency",)  # only rows under load (a concurrency or rate) depend on them


def split_series(names, holdout_fraction=0.3):
    """Deterministic train/held-out split by series name (CRC32 buckets)."""
    held = {n for n in names if (zlib.crc32(n.encode()) % 1000) < holdout_fraction * 1000}
    if holdout_fraction > 0 and not held and len(names) > 1:
        held = {sorted(names)[0]}
    return [n for n in names if n not in held], [n for n in names if n in held]


def _unsquash(v, name):
    lo, hi = BOUNDS[name]
    p = np.clip((v - lo) / (hi - lo), 1e-3, 1 - 1e-3)
    return float(np.log(p / (1 - p)))


def _source_weights(rows):
    """Each row's weight: every source weighs the same in total, however many rows it has."""
    per_source = {}
    for r in rows:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    return np.array([len(rows) / (len(per_source) * per_source[r.source]) for r in rows])


def _speedup_data(rows, weight, dtype, kind="batch"):
    """Stacked pytrees of speedup rows of one load kind and the arrays their residuals need. Rows per
    batch are stacked under the pure roofline; rows at a request rate or a concurrency under their own
    engine's profile, for its scheduler limits on their GPU (the engine terms are replaced by the fitted
    ones either way)."""
    stacked = measured.stack(rows, engines.load(engines.PURE) if kind == "batch" else None, None, dtype)
    known, _ = validate.known_alpha(rows, dtype)
    anchor_of = validate.anchors(rows, known)
    times = lambda attr: jnp.asarray([getattr(r, attr) or np.nan for r in rows], dtype)  # noqa: E731
    anchor_rows = np.unique(anchor_of[anchor_of >= 0])
    pos = {a: i for i, a in enumerate(anchor_rows.tolist())}
    anchor_pos = np.array([pos.get(a, 0) for a in anchor_of.tolist()])
    t_base, t_sd = times("t_base_s"), times("t_sd_step_s")
    scored = (anchor_of < 0) | (anchor_of != np.arange(len(rows)))
    used = np.concatenate([scored, np.isfinite(np.asarray(t_base)), np.isfinite(np.asarray(t_sd))])
    metric = validate.metric_codes(rows) if kind != "batch" else jnp.zeros(len(rows), jnp.int32)
    block = dict(stacked=stacked, alpha_known=jnp.asarray(np.nan_to_num(known, nan=0.5), dtype),
                 anchor_of=jnp.asarray(anchor_of), anchor_rows=jnp.asarray(anchor_rows, jnp.int32),
                 anchor_pos=jnp.asarray(anchor_pos, jnp.int32), s_meas=jnp.asarray([r.speedup for r in rows], dtype),
                 t_base=t_base, t_sd=t_sd, metric=metric)
    return block, used, np.tile(weight, 3)


def _plain_data(rows, weight, dtype):
    """Plain step-time rows under load (`inputs.steps`), one block per load kind (each kind's model is
    traced alone: `validate.plain_at`). A row is stacked with its own engine's scheduler limits on its
    GPU (the engine terms are then replaced by the fitted ones)."""
    blocks, used, weights = {}, [], []
    for kind in validate.LOAD_KINDS:
        idx = [i for i, r in enumerate(rows) if r.load_kind == kind]
        if not idx:
            continue
        part = [rows[i] for i in idx]
        stacked = steps.stack(part, [measured.engine_profile(r.engine_name) for r in part], dtype)
        _, n, metric = validate.plain_codes(part, dtype)
        blocks[kind] = dict(stacked=stacked, n=n, metric=metric, meas=jnp.asarray([r.value_s for r in part], dtype))
        used.append(np.ones(len(part), bool))
        weights.append(weight[idx])
    return blocks, used, weights


def _overrides(rows, gpu_terms, dtype):
    """Per-row engine terms that a GPU section fixes for its rows (`gpu_terms`: hardware slug -> {term: value}):
    term -> (mask over `rows`, values), for `_with_terms`."""
    out = {}
    for n in sorted({n for terms in (gpu_terms or {}).values() for n in terms}):
        mask = [n in (gpu_terms or {}).get(r.hardware, {}) for r in rows]
        if any(mask):
            vals = [(gpu_terms or {}).get(r.hardware, {}).get(n, 0.0) for r in rows]
            out[n] = (jnp.asarray(mask), jnp.asarray(vals, dtype))
    return out


def _data(rows, dtype, gpu_terms=None):
    """The arrays the loss needs: speedup rows (`_speedup_data`) and plain step times under load
    (`_plain_data`), each row weighted so that every source weighs the same, `used` marking the
    residuals that count (in `_residuals`' order)."""
    weight = _source_weights(rows)
    plain = [i for i, r in enumerate(rows) if r.is_step]
    data, used, weights = {"speedups": {}}, [], []
    for kind in validate.LOAD_KINDS:  # speedups per batch, at a request rate, at a concurrency: one block each
        spd = [i for i, r in enumerate(rows) if not r.is_step and r.load_kind == kind]
        if spd:
            data["speedups"][kind], u, w = _speedup_data([rows[i] for i in spd], weight[spd], dtype, kind)
            data["speedups"][kind]["over"] = _overrides([rows[i] for i in spd], gpu_terms, dtype)
            used.append(u), weights.append(w)
    if plain:
        data["plain"], u, w = _plain_data([rows[i] for i in plain], weight[plain], dtype)
        for kind, blk in data["plain"].items():
            blk["over"] = _overrides([rows[i] for i in plain if rows[i].load_kind == kind], gpu_terms, dtype)
        used += u
        weights += w
    data["used"] = jnp.asarray(np.concatenate(used))
    data["weight"] = jnp.asarray(np.concatenate(weights), dtype)
    return data


def _values(z, fit, held):
    """Physical values of every engine term: fitted ones from `z` (normalised), held ones fixed.
    `fit` is a tuple of names, or a dict name -> 1.0 (fitted) / 0.0 (held) for traced masks."""
    def one(n):
        if not isinstance(fit, dict) and n not in fit:
            return held[n]
        v = BOUNDS[n][0] + (BOUNDS[n][1] - BOUNDS[n][0]) * z[n]
        return jnp.where(fit[n] > 0, v, held[n]) if isinstance(fit, dict) else v
    return {n: one(n) for n in FIELDS}


def _with_terms(hw, vals, over=None):
    """Stacked hardware with every engine term set to its (fitted or held) value, but where a GPU section
    fixes a term for a row (`over`: term -> (row mask, values), `_overrides`)."""
    def one(n, v):
        v = jnp.broadcast_to(jnp.asarray(v, hw.flops_per_s.dtype), hw.flops_per_s.shape)
        if over and n in over:
            mask, fixed = over[n]
            v = jnp.where(mask, fixed.astype(v.dtype), v)
        return v
    return hw.replace(**{n: one(n, v) for n, v in vals.items()})


def _speedup_residuals(vals, data, kind="batch"):
    """Log residuals of speedup rows of one load kind: speedups (ratios at a rate or a concurrency, by the
    model of the row's load, `validate.load_ratio`) of non-anchor rows, then step times where measured
    (rows per batch only; rows at load carry none: those entries do not count)."""
    hw, deploy, tgt, dr, dec = data["stacked"]
    hw = _with_terms(hw, vals, data.get("over"))
    metric = data["metric"]
    load = {} if kind == "batch" else dict(kind=kind)
    anchor_of, sel = data["anchor_of"], data["anchor_rows"]
    if sel.shape[0]:  # alpha matched at each acceptance group's anchor only
        sub = jax.tree.map(lambda x: x[sel], (hw, deploy, tgt, dr, dec))
        a_anchor = jax.vmap(lambda *a: validate.matching_alpha(*a[:6], 40, metric=a[6], **load))(
            *sub, data["s_meas"][sel], metric[sel])
        alpha = jnp.where(anchor_of >= 0, a_anchor[data["anchor_pos"]], data["alpha_known"])
    else:
        alpha = data["alpha_known"]
    dec = dec.replace(alpha=alpha)
    if kind == "batch":
        r = jax.vmap(step)(hw, deploy, tgt, dr, dec)
        pred, times = r.speedup, (r.t_target_s, r.t_sd_step_s)
    else:
        pred, _ = jax.vmap(lambda *a: validate.load_ratio(*a[:5], kind, a[5]))(hw, deploy, tgt, dr, dec, metric)
        times = (jnp.ones_like(pred), jnp.ones_like(pred))  # no step times at load (`used` is False there)
    out = [jnp.log(pred) - jnp.log(data["s_meas"])]
    for p, meas in zip(times, (data["t_base"], data["t_sd"])):
        ok = jnp.isfinite(meas)
        out.append(jnp.log(p) - jnp.log(jnp.where(ok, meas, 1.0)))
    return out


def _residuals(vals, data):
    """Log residuals: speedup rows (`_speedup_residuals`), then plain step times under load, each by the
    model of its load kind (`validate.plain_at`); 0 where an entry does not count (`data["used"]`)."""
    # blocks in `validate.LOAD_KINDS` order, as `_data` stacked `used` (a dict under jit is in key order)
    spd = data["speedups"]
    out = [r for kind in validate.LOAD_KINDS if kind in spd for r in _speedup_residuals(vals, spd[kind], kind)]
    plain = data.get("plain", {})
    for kind in (k for k in validate.LOAD_KINDS if k in plain):
        blk = plain[kind]
        hw, deploy, tgt, dr, dec = blk["stacked"]
        pred, _ = jax.vmap(lambda *a, kind=kind: validate.plain_at(kind, *a))(
            _with_terms(hw, vals, blk.get("over")), deploy, tgt, dr, dec, blk["n"], blk["metric"])
        out.append(jnp.log(pred) - jnp.log(blk["meas"]))
    return jnp.where(data["used"], jnp.concatenate(out), 0.0)


def _loss(vals, data):
    """Weighted mean squared log error; every source weighs the same (`_data`), so one large source
    cannot dictate the profile a different source is predicted with."""
    res = _residuals(vals, data)
    w = data["weight"] * data["used"]
    return jnp.sum(w * res**2) / jnp.maximum(jnp.sum(w), 1e-30)


SEGMENT = 50  # Adam steps per jitted segment (progress is reported between segments)


@functools.partial(jax.jit, static_argnames=("steps",))
def _segment(params, opt_state, data, held, mask, steps, learning_rate, total, done):
    """`steps` Adam steps on the unconstrained parameters, with a cosine-decayed step size over `total`
    steps (`done` so far). `mask` (name -> 1/0) says which terms are fitted. Only `steps` is static, so
    one compilation per data set serves every subset of fitted terms and every run length."""
    def loss_u(p):
        return _loss(_values({n: jax.nn.sigmoid(p[n]) for n in FIELDS}, mask, held), data)

    def body(carry, _):
        p, s, t = carry
        val, g = jax.value_and_grad(loss_u)(p)
        with jax.numpy_dtype_promotion("standard"):  # optax's Adam promotes its int32 step count
            upd, s = optax.scale_by_adam().update(g, s, p)
        frac = jnp.minimum(t / total, 1.0)
        lr = learning_rate * (0.02 + 0.98 * 0.5 * (1.0 + jnp.cos(jnp.pi * frac)))
        p = jax.tree.map(lambda x, u: x - lr * u, p, upd)
        return (p, s, t + 1.0), val

    (params, opt_state, _), hist = jax.lax.scan(body, (params, opt_state, done), None, length=steps)
    return params, opt_state, hist


def _optimise(data, fit, held, steps, learning_rate, dtype, progress, label, start=None):
    start = start or START
    params = {n: jnp.asarray(_unsquash(start[n], n), dtype) for n in FIELDS}
    mask = {n: jnp.asarray(1.0 if n in fit else 0.0, dtype) for n in FIELDS}
    held = {n: jnp.asarray(v, dtype) for n, v in held.items()}
    with jax.numpy_dtype_promotion("standard"):
        state = optax.scale_by_adam().init(params)
    steps = max(SEGMENT, -(-steps // SEGMENT) * SEGMENT)  # whole segments: one compiled length
    hist, done = [], 0
    as_dt = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    while done < steps:
        params, state, h = _segment(params, state, data, held, mask, SEGMENT, as_dt(learning_rate), as_dt(steps),
                                    as_dt(done))
        hist.append(np.asarray(h))
        done += SEGMENT
        if progress:
            progress(label, done, steps, float(h[-1]))
    z = {n: float(jax.nn.sigmoid(params[n])) for n in fit}
    return _values(z, fit, {n: float(v) for n, v in held.items()}), np.concatenate(hist)


@jax.jit
def _jacobian(z, data):
    """Weighted residuals and their Jacobian with respect to every engine term (bound-normalised z),
    compiled once per data set; `identifiability` keeps the columns of the fitted terms."""
    used = data["used"]
    w = data["weight"] * used
    scale = jnp.sqrt(w / jnp.maximum(jnp.sum(w) / jnp.maximum(jnp.sum(used), 1), 1e-30))

    def res_z(zz):
        vals = {n: BOUNDS[n][0] + (BOUNDS[n][1] - BOUNDS[n][0]) * zz[i] for i, n in enumerate(FIELDS)}
        return _residuals(vals, data) * scale

    return res_z(z), jax.jacfwd(res_z)(z)


def identifiability(vals, fit, data, dtype):
    """Standard error of each fitted parameter (Gauss-Newton, bound-normalised coordinates) and the
    condition number of J^T J. A direction the data does not constrain gets a huge error (the inverse
    is regularised by 1e-9 of the mean eigenvalue instead of pseudo-inverted to 0)."""
    fit = tuple(fit)
    if not fit:
        return {}, {}, float("nan")
    width = {n: BOUNDS[n][1] - BOUNDS[n][0] for n in FIELDS}
    z0 = jnp.asarray([(vals[n] - BOUNDS[n][0]) / width[n] for n in FIELDS], dtype)
    r, jac = (np.asarray(x, np.float64) for x in _jacobian(z0, data))
    used = np.asarray(data["used"])
    jac = jac[:, [FIELDS.index(n) for n in fit]]
    n_res, p = int(used.sum()), len(fit)
    a = jac.T @ jac
    eig = np.linalg.eigvalsh(a)
    cond = float(eig.max() / eig.min()) if eig.min() > 0 else float("inf")
    if n_res <= p:  # no residual degrees of freedom: the data bound no error (a perfect fit says nothing);
        # every ratio is >= 1, largest where the residuals move least with the term (held first)
        norm = np.sqrt((jac**2).sum(axis=0))
        return (dict.fromkeys(fit, float("inf")),
                {n: 1.0 + 1.0 / (norm[i] + 1e-12) for i, n in enumerate(fit)}, cond)
    s2 = max(float(r @ r) / (n_res - p), NOISE_FLOOR**2)
    cov = s2 * np.linalg.inv(a + (1e-9 * np.trace(a) / p + 1e-300) * np.eye(p))
    se = {n: float(width[n] * np.sqrt(max(cov[i, i], 0.0))) for i, n in enumerate(fit)}
    ratio = {n: se[n] / (0.25 * max(abs(vals[n]), 0.02 * width[n])) for n in fit}
    return se, ratio, cond


NOISE_FLOOR = 1e-3  # log residual below which a fit is not believed exact (0.1%: below any measurement's noise)
F_CRIT = 4.0  # F statistic above which holding a term is rejected (about 95% for one term and many residuals)


def needed(loss, loss_without, n_res, n_fit):
    """True where holding one term raises the loss more than noise would (an F test of one restriction:
    F = (L_without - L) / (L / (n_res - n_fit)) > `F_CRIT`): the data need that term even where its
    standard error is large (two terms that move the same residuals: hold the other one instead). With no
    residual degrees of freedom (n_res <= n_fit) no test can show a term is needed: False."""
    if n_res <= n_fit:
        return False
    return (loss_without - loss) / max(loss, 1e-30) * max(n_res - n_fit, 1) > F_CRIT


@dataclasses.dataclass(frozen=True)
class Calibration:
    profile: engines.EngineProfile
    values: dict                # every engine term, fitted or held
    identified: tuple           # fitted and identified by the data (standard error below a quarter of the value)
    held: tuple                 # held at PRIORS (or at hbm_efficiency) because the data did not identify them
    not_identified: tuple       # fitted because holding them raised the loss beyond noise, yet poorly identified
    std_errors: dict            # standard error of each parameter (final fit; first fit for held ones)
    condition: float            # condition number of the first fit's J^T J (bound-normalised)
    train_series: list
    heldout_series: list
    loss_history: np.ndarray
    rows: int


def fit(rows, *, name="calibrated", hbm_efficiency=0.85, holdout_fraction=0.3, steps=1500, learning_rate=0.05,
        dtype=jnp.float32, train_series=None, fields=None, progress=None, prior=None, gpu_terms=None):
    """Calibrate one engine profile on the training series of `rows`; returns a `Calibration`.

    `rows`: speedup rows (`inputs.measured`) and plain step times under load (`inputs.steps`), in any mix.
    `fields`: the engine terms that may be fitted (the data decides which are identified); by default all,
    but `SERVING_ONLY` (eta_P: only prefill uses it) where no training row is a plain time under load.
    `prior`: values to start from and to hold the unidentified terms at (default `PRIORS`), e.g. a
    profile pooled over every engine, so that an engine's own data refines what it identifies.
    `progress`: callable(stage, done, total, loss) or None.
    `gpu_terms`: hardware slug -> {term: value} held for that GPU's rows only (a GPU section's own terms,
    `transfer.fit_engine`): those rows inform every other term at their section's values."""
    rows = [r for r in rows if not r.unsupported]  # speedups and plain step times, at every load
    speedups = [r for r in rows if not r.is_step]
    bad = dict(zip(map(id, speedups), validate.inconsistent(speedups))) if speedups else {}
    rows = [r for r in rows if not bad.get(id(r), False)]
    _, names = measured.series_index(rows) if rows else (None, [])
    train, held_out = split_series(names, holdout_fraction) if train_series is None else (
        [n for n in names if n in set(train_series)], [n for n in names if n not in set(train_series)])
    tr_rows = [r for r in rows if r.series in set(train)]
    if not tr_rows:
        raise SpecError("calibration needs at least one supported, consistent training row")
    has_times = any(r.is_step or r.t_base_s or r.t_sd_step_s for r in tr_rows)
    under_load = any(r.load_kind != "batch" for r in tr_rows)
    if fields is None:
        fields = tuple(f for f in FIELDS if under_load or f not in SERVING_ONLY)
    held = dict(prior or PRIORS)
    start = dict(prior) if prior else dict(START)
    candidates = tuple(f for f in fields if f in FIELDS)
    if not has_times:  # speedups fix only ratios of times: hold eta_W
        held["hbm_efficiency"] = float(hbm_efficiency) if prior is None else held["hbm_efficiency"]
        candidates = tuple(f for f in candidates if f != "hbm_efficiency")
    data = _data(tr_rows, dtype, gpu_terms)
    if not np.asarray(data["used"]).any():
        raise SpecError("nothing to fit: every training row is an acceptance anchor and no row has step times "
                        "(give acceptance_rate / accepted_length, more batches per series, or t_base_s)")
    vals, hist = _optimise(data, candidates, held, steps, learning_rate, dtype, progress, "fit", start=start)
    hists, identified = [hist], candidates
    se, ratio, cond = identifiability(vals, identified, data, dtype)
    first_se, first_cond = se, cond
    n_res = int(np.asarray(data["used"]).sum())
    loss = float(hist[-1])

    def refit_without(names):  # the fit again with `names` held at their priors: (kept terms, values, final loss)
        kept = tuple(n for n in identified if n not in names)
        t_vals, t_hist = _optimise(data, kept, held, max(steps // 3, 10), learning_rate, dtype, progress,
                                   "refit without " + ", ".join(names),
                                   start={**start, **vals, **{n: held[n] for n in names}})
        hists.append(t_hist)
        return kept, t_vals, float(t_hist[-1])

    while identified:
        pinned = tuple(n for n in identified if ratio[n] >= 1.0 and at_bound(n, vals[n]))
        if pinned and len(pinned) < len(identified):  # a poorly identified term at its bound says the data
            # want more than physics allows, which no value of that term gives (a term is missing): held
            identified, vals, loss = refit_without(pinned)
            se, ratio, cond = identifiability(vals, identified, data, dtype)
            continue
        if max(ratio.values()) < 1.0:
            break
        for worst in sorted((n for n in identified if ratio[n] >= 1.0), key=ratio.get, reverse=True):
            # hold the least identified term the data can spare
            trial, t_vals, t_loss = refit_without((worst,))
            if not needed(loss, t_loss, n_res, len(identified)):
                identified, vals, loss = trial, t_vals, min(loss, t_loss)
                break
        else:  # every poorly identified term is needed: keep them (their errors say how poorly)
            break
        se, ratio, cond = identifiability(vals, identified, data, dtype)
    hist1 = np.concatenate(hists)
    fitted, identified = identified, tuple(n for n in identified if ratio[n] < 1.0)
    if not identified:  # a profile of priors must not be written as "calibrated"
        raise SpecError(f"the data identify none of the engine terms ({n_res} residuals from {len(tr_rows)} training "
                        f"rows for {len(candidates)} terms; condition number {first_cond:.3g}): give step times "
                        "(t_base_s, t_sd_step_s), more batches or series, or use a preset --engine")
    held_names = tuple(n for n in FIELDS if n not in fitted)
    values = {**{n: float(engines.DEFAULTS[n]) for n in catalogue.ENGINE if n not in vals},
              **{n: float(v) for n, v in vals.items()}}  # a term without fitting bounds: its default
    profile = engines.EngineProfile(slug=name, name=name, values=values,
                                    fitted=fitted, description=f"calibrated on {len(tr_rows)} rows")
    return Calibration(profile=profile, values=profile.values, identified=identified, held=held_names,
                       not_identified=tuple(n for n in fitted if n not in identified),
                       std_errors={**first_se, **se}, condition=first_cond, train_series=train, heldout_series=held_out,
                       loss_history=hist1, rows=len(tr_rows))


def _toml_value(v):
    """A TOML literal: numbers as numbers, strings as JSON-escaped basic strings (valid TOML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, (int, float)):
        return f"{v:.6g}" if isinstance(v, float) else str(v)
    return toml_string(str(v))


def toml_string(s):
    """A TOML basic string: quotation mark, backslash and the control characters TOML forbids raw
    (U+0000-U+001F except tab, U+007F) escaped; everything else, emoji included, written as itself
    (JSON's surrogate-pair escapes are not valid TOML)."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def profile_toml(cal, stats):
    """An engine TOML for a calibration (usable wherever an engine preset is: `--engine FILE`). Every
    engine key of the input catalogue is written, so no term of the profile can be dropped."""
    p = cal.profile
    lines = ["# Written by specjax calibrate. Identified by the data: " + (", ".join(cal.identified) or "none"),
             *(["# fitted but not identified (standard error above a quarter of the value): "
                + ", ".join(cal.not_identified)] if cal.not_identified else []),
             "# held (not identified): " + ", ".join(f"{n} = {cal.values[n]:.6g}" for n in cal.held),
             f"name = {_toml_value(p.name)}", f"description = {_toml_value(p.description)}",
             f"fitted = {_toml_value(list(cal.identified))}"]
    lines += [f"{k} = {_toml_value(float(cal.values[k]))}" for k in catalogue.ENGINE]
    lines += ["", "[calibration]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in stats.items() if v is not None]
    return "\n".join(lines) + "\n"


def print_progress(stage, done, total, loss):
    """A progress line on stderr (the CLI's `progress` callback)."""
    print(f"\r  calibrate {stage}: {done}/{total} steps, loss {loss:.4g}", end="\n" if done == total else "",
          file=sys.stderr, flush=True)
