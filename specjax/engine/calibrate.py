"""Fit achieved efficiencies, fixed overhead and expert locality to measurements (MODEL.md 4).

Per hardware: eta_F (achieved fraction of peak FLOP/s), eta_W (of HBM bandwidth), T_fixed (per
forward pass) and optionally the expert-locality factor lambda, each squashed into physical
bounds by a sigmoid; plus one acceptance rate per series that gives neither alpha nor tau.
Loss: mean squared log error of speedup (and of step times, where the CSV has `t_base_s` /
`t_sd_step_s`), minimised by `optax.adam` inside a `lax.scan`.

Identifiability: a speedup is a ratio of times, and scaling eta_F and eta_W by s while dividing
T_fixed by s leaves every speedup unchanged. With speedups only, eta_W is therefore held at
`hbm_efficiency` (default 0.85) and eta_F, T_fixed are fitted relative to it; with measured step
times all three are fitted.
"""

import dataclasses
import functools
import json
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..cost import catalogue
from ..inputs import hardware as _hw
from ..inputs import measured
from . import validate
from ..errors import SpecError
from ..cost.speculative import step

BOUNDS = {n: i.fit for n, i in catalogue.FIT.items()}  # physical bounds of each calibrated parameter
FIELDS = tuple(BOUNDS)


def split_series(names, holdout_fraction=0.3):
    """Deterministic train/held-out split by series name (CRC32 buckets)."""
    held = {n for n in names if (zlib.crc32(n.encode()) % 1000) < holdout_fraction * 1000}
    if holdout_fraction > 0 and not held and len(names) > 1:
        held = {sorted(names)[0]}
    return [n for n in names if n not in held], [n for n in names if n in held]


def _squash(u, name):
    lo, hi = BOUNDS[name]
    return lo + (hi - lo) * jax.nn.sigmoid(u)


def _unsquash(v, name):
    lo, hi = BOUNDS[name]
    p = np.clip((v - lo) / (hi - lo), 1e-4, 1 - 1e-4)
    return float(np.log(p / (1 - p)))


@functools.partial(jax.jit, static_argnames=("steps", "fit"))
def _fit(hw, deploy, tgt, dr, dec, hw_idx, alpha_known, anchor_of, s_meas, t_base, t_sd, init, steps, fit,
         learning_rate):
    """optax loop over per-hardware parameters; rows without a known alpha take the alpha that
    matches their series' anchor row (as `validate` does). Returns params, loss history, final loss."""
    has_anchor = anchor_of >= 0
    scored = ~has_anchor | (anchor_of != jnp.arange(anchor_of.shape[0]))

    def apply(params):
        vals = {name: (_squash(params[name][hw_idx], name) if name in fit else getattr(hw, name)) for name in FIELDS}
        return hw.replace(**vals)

    def loss(params):
        h = apply(params)
        a_all = jax.vmap(lambda *a: validate.matching_alpha(*a, 40))(h, deploy, tgt, dr, dec, s_meas)
        alpha = jnp.where(has_anchor, a_all[jnp.maximum(anchor_of, 0)], alpha_known)
        r = jax.vmap(step)(h, deploy, tgt, dr, dec.replace(alpha=alpha))
        err = (jnp.log(r.speedup) - jnp.log(s_meas)) ** 2
        okb, oks = jnp.isfinite(t_base), jnp.isfinite(t_sd)
        err += jnp.where(okb, (jnp.log(r.t_target_s) - jnp.log(jnp.where(okb, t_base, 1.0))) ** 2, 0.0)
        err += jnp.where(oks, (jnp.log(r.t_sd_step_s) - jnp.log(jnp.where(oks, t_sd, 1.0))) ** 2, 0.0)
        return jnp.sum(jnp.where(scored, err, 0.0)) / jnp.maximum(jnp.sum(scored), 1)

    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=0.02))

    def body(carry, _):
        p, s = carry
        val, g = jax.value_and_grad(loss)(p)
        upd, s = opt.update(g, s, p)
        return (optax.apply_updates(p, upd), s), val

    (params, _), hist = jax.lax.scan(body, (init, opt.init(init)), None, length=steps)
    return params, hist, loss(params)


@dataclasses.dataclass(frozen=True)
class Calibration:
    profiles: dict          # hardware slug -> HardwareProfile (calibrated)
    values: dict            # hardware slug -> {field: value}
    train_series: list
    heldout_series: list
    loss_history: np.ndarray
    fit_fields: tuple


def fit(rows, *, mode="operator", fit_locality=False, fit_overlap=True, hbm_efficiency=0.85, holdout_fraction=0.3,
        steps=1500,
        learning_rate=0.05, dtype=jnp.float32, train_series=None):
    """Calibrate per hardware on the training series; returns a `Calibration`."""
    _, names = measured.series_index(rows)
    train, held = split_series(names, holdout_fraction) if train_series is None else (
        list(train_series), [n for n in names if n not in set(train_series)])
    if not train:
        raise SpecError("calibration needs at least one training series")
    tr_rows = [r for r in rows if r.series in set(train)]
    has_times = any(r.t_base_s or r.t_sd_step_s for r in tr_rows)
    fit_fields = ("flops_efficiency", "fixed_overhead_s") + (("hbm_efficiency",) if has_times else ()) + \
        (("expert_locality",) if fit_locality else ()) + (("non_overlap",) if fit_overlap else ())
    hw_names = sorted({r.hardware for r in tr_rows})
    hw_pos = {h: i for i, h in enumerate(hw_names)}
    hw, deploy, tgt, dr, dec = measured.stack(tr_rows, None, dtype, mode)
    if not has_times:
        hw = hw.replace(hbm_efficiency=jnp.full_like(hw.hbm_efficiency, hbm_efficiency))
    known, _ = validate.known_alpha(tr_rows, dtype)
    anchor_of = validate.anchors(tr_rows, known)
    start = {"flops_efficiency": 0.7, "hbm_efficiency": hbm_efficiency, "fixed_overhead_s": 5e-5,
             "expert_locality": 0.5, "non_overlap": 0.3}
    init = {name: jnp.full(len(hw_names), _unsquash(start[name], name), dtype) for name in FIELDS}
    t_base = np.array([r.t_base_s if r.t_base_s else np.nan for r in tr_rows])
    t_sd = np.array([r.t_sd_step_s if r.t_sd_step_s else np.nan for r in tr_rows])
    hw_idx = jnp.asarray([hw_pos[r.hardware] for r in tr_rows])
    params, hist, final = _fit(hw, deploy, tgt, dr, dec, hw_idx, jnp.asarray(np.nan_to_num(known, nan=0.5), dtype),
                               jnp.asarray(anchor_of), jnp.asarray([r.speedup for r in tr_rows], dtype),
                               jnp.asarray(t_base, dtype), jnp.asarray(t_sd, dtype), init, steps, fit_fields,
                               learning_rate)
    values, profiles = {}, {}
    for h in hw_names:
        base = _hw.load(h)
        v = {name: float(_squash(params[name][hw_pos[h]], name)) if name in fit_fields
             else float(getattr(base, name)) for name in FIELDS}
        if not has_times:
            v["hbm_efficiency"] = float(hbm_efficiency)
        values[h] = v
        profiles[h] = base.with_rates(calibrated_for=h, **v)
    return Calibration(profiles=profiles, values=values, train_series=train, heldout_series=held,
                       loss_history=np.asarray(hist), fit_fields=fit_fields)


def _toml_value(v):
    """A TOML literal: numbers as numbers, strings as JSON-escaped basic strings (valid TOML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return f"{v:.6g}" if isinstance(v, float) else str(v)
    return json.dumps(str(v))


def profile_toml(profile, stats):
    """A hardware TOML for a calibrated profile (usable wherever a hardware preset is). Every profile
    key of the input catalogue is written, so no field of the profile can be dropped."""
    lines = [f"# Calibrated by specjax calibrate; fitted: {' '.join(str(stats.get('fitted', '')).split())}",
             f"name = {_toml_value(profile.name + ' (calibrated)')}",
             f"calibrated_for = {_toml_value(profile.calibrated_for)}", f"source = {_toml_value(profile.source)}"]
    lines += [f"{k} = {_toml_value(float(profile.rates[k]))}" for k in catalogue.PROFILE]
    lines += ["", "[flops_per_s]"]
    lines += [f"{k} = {_toml_value(float(v))}" for k, v in profile.flops_per_s.items()]
    lines += ["", "[calibration]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in stats.items()]
    return "\n".join(lines) + "\n"
