"""How well the model predicts measured speedups (MODEL.md section 4, `specjax validate`).

Acceptance is taken from the row (alpha, or alpha solved from the accepted length); where a
series gives neither, one alpha per series is fitted so that the model matches the series'
smallest-batch row exactly (its "anchor"), and the other rows test the batch dependence. Anchor
rows are reported but not scored. Summary: median and 90th-percentile absolute percentage
error, the share of rows on the right side of 1.0, and the median within-series Spearman rank
correlation between predicted and measured speedups.
"""

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl

from ..inputs import measured
from ..cost.acceptance import alpha_from_tokens
from ..cost._search import bisect
from ..cost.speculative import step
from ..cost.status import Point


@jax.jit
def predict(hw, deploy, tgt, dr, dec):
    """Speedup and point status for stacked rows (leading axis = row)."""
    r = jax.vmap(step)(hw, deploy, tgt, dr, dec)
    return r.speedup, r.status


def matching_alpha(h, p, t, d, x, s_meas, iters=50):
    """alpha in [0, 1] with S(alpha) = s_meas at one row (S increases with alpha; clipped at the ends).

    Differentiable in the other inputs: bisection gives the value, one Newton step with a stopped
    derivative gives, by the implicit function theorem, d alpha / d theta = -(dS/d theta) / (dS/d alpha)
    (used by calibration)."""
    def s_of(a, hh):
        return step(hh, p, t, d, x.replace(alpha=a)).speedup

    h_const = jax.lax.stop_gradient(h)
    a0 = jax.lax.stop_gradient(bisect(lambda a: s_of(a, h_const) < s_meas, jnp.zeros_like(s_meas),
                                      jnp.ones_like(s_meas), iters))
    res = s_of(a0, h) - s_meas
    slope = jax.lax.stop_gradient(jax.grad(s_of)(a0, h))
    inside = (jnp.abs(jax.lax.stop_gradient(res)) < 1e-3 * s_meas) & (slope > 0)
    return jnp.where(inside, a0 - res / jnp.where(inside, slope, 1.0), a0)


@jax.jit
def fit_alpha(hw, deploy, tgt, dr, dec, target_speedup):
    """Per stacked row: the alpha that makes the model match `target_speedup` there."""
    return jax.vmap(matching_alpha)(hw, deploy, tgt, dr, dec, target_speedup)


def known_alpha(rows, dtype=jnp.float32):
    """alpha per row where the row gives it (directly or as an accepted length), NaN elsewhere,
    and its source ('given', 'accepted_length', 'fitted')."""
    alpha = np.full(len(rows), np.nan)
    source = np.array(["fitted"] * len(rows), dtype=object)
    for i, r in enumerate(rows):
        if r.alpha is not None:
            alpha[i], source[i] = r.alpha, "given"
        elif r.tau is not None:
            alpha[i] = float(alpha_from_tokens(jnp.asarray(r.tau, dtype), jnp.asarray(r.k, dtype)))
            source[i] = "accepted_length"
    return alpha, source


def anchors(rows, known):
    """Row index of each row's series anchor (its smallest-batch row) where the series gives no
    acceptance, else -1."""
    idx, names = measured.series_index(rows)
    out = np.full(len(rows), -1)
    for s in range(len(names)):
        members = np.flatnonzero(idx == s)
        if np.isnan(known[members]).all():
            out[members] = min(members, key=lambda i: (rows[i].batch, i))
    return out


def resolve_alpha(rows, stacked, dtype=jnp.float32):
    """alpha per row and where it came from ('given', 'accepted_length', 'fitted'), anchor flags."""
    alpha, source = known_alpha(rows, dtype)
    anchor_of = anchors(rows, alpha)
    sel = np.unique(anchor_of[anchor_of >= 0])
    if sel.size:
        sub = jax.tree.map(lambda x: x[sel], stacked)
        fitted = np.asarray(fit_alpha(*sub, jnp.asarray([rows[i].speedup for i in sel], dtype)))
        by_anchor = dict(zip(sel.tolist(), fitted))
        for i, a in enumerate(anchor_of):
            if a >= 0:
                alpha[i] = by_anchor[a]
    anchor = anchor_of == np.arange(len(rows))
    return alpha, source, anchor


def _spearman(df):
    per = (df.group_by("series").agg(pl.len().alias("n"), pl.corr("predicted_speedup", "measured_speedup",
                                                                    method="spearman").alias("rho"))
           .filter((pl.col("n") >= 3) & pl.col("rho").is_not_nan() & pl.col("rho").is_not_null()))
    return float(per["rho"].median()) if per.height else float("nan")


def summarize(df):
    """Summary metrics over scored (non-anchor) rows of a per-row table."""
    scored = df.filter(~pl.col("anchor"))
    ape = scored["ape"].to_numpy()
    return dict(rows=int(scored.height), rows_skipped=int(df.height - scored.height),
                median_ape=float(np.median(ape)) if ape.size else float("nan"),
                p90_ape=float(np.percentile(ape, 90)) if ape.size else float("nan"),
                side_accuracy=float(scored["side_ok"].mean()) if ape.size else float("nan"),
                spearman_median=_spearman(df))


def evaluate(rows, profiles=None, mode="operator", dtype=jnp.float32):
    """Predict every row; returns (per-row polars DataFrame, summary dict)."""
    stacked = measured.stack(rows, profiles, dtype, mode)
    alpha, source, anchor = resolve_alpha(rows, stacked, dtype)
    hw, deploy, tgt, dr, dec = stacked
    dec = dec.replace(alpha=jnp.asarray(alpha, dec.alpha.dtype))
    s_pred, status = (np.asarray(x) for x in predict(hw, deploy, tgt, dr, dec))
    meas = np.array([r.speedup for r in rows])
    df = pl.DataFrame(dict(
        line=[r.line for r in rows], series=[r.series for r in rows], source=[r.source for r in rows],
        target=[r.target for r in rows], drafter=[r.drafter for r in rows], draft=[r.draft or "" for r in rows],
        hardware=[r.hardware for r in rows], tp=[r.tp for r in rows], batch=[r.batch for r in rows],
        k=[r.k for r in rows], context=[r.context for r in rows], alpha=alpha, alpha_source=list(source),
        anchor=anchor, measured_speedup=meas, predicted_speedup=s_pred.astype(np.float64),
        ape=np.abs(s_pred / meas - 1.0), side_ok=(s_pred > 1.0) == (meas > 1.0),
        status=list(Point.decode(status))))
    return df, summarize(df)
