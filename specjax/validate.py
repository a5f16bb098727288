"""How well the model predicts measured speedups (MODEL.md section 4, `specjax validate`).

Acceptance is taken from the row (alpha, or alpha solved from the accepted length); where a
series gives neither, one alpha per series is fitted so that the model matches the series'
smallest-batch row exactly (its "anchor"), and the other rows test the batch dependence. Anchor
rows are reported but not scored. Summary: median and 90th-percentile absolute percentage
error, the share of rows on the right side of 1.0, and the median within-series Spearman rank
correlation between predicted and measured speedups.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl

from . import measured
from .acceptance import alpha_from_tokens
from .speculative import STATUS, step


@functools.partial(jax.jit, static_argnames=("mode",))
def predict(hw, tgt, dr, dec, mode="operator"):
    """Speedup and point status for stacked rows (leading axis = row)."""
    r = jax.vmap(lambda h, t, d, x: step(h, t, d, x, mode))(hw, tgt, dr, dec)
    return r.speedup, r.status


@functools.partial(jax.jit, static_argnames=("mode", "iters"))
def fit_alpha(hw, tgt, dr, dec, target_speedup, mode="operator", iters=50):
    """Per row: alpha in [0, 1] with S(alpha) = target (S increases with alpha); clipped at the ends."""
    def one(h, t, d, x, s_meas):
        def body(_, b):
            lo, hi = b
            mid = 0.5 * (lo + hi)
            below = step(h, t, d, x.replace(alpha=mid), mode).speedup < s_meas
            return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

        lo, hi = jax.lax.fori_loop(0, iters, body, (jnp.zeros_like(s_meas), jnp.ones_like(s_meas)))
        return 0.5 * (lo + hi)

    return jax.vmap(one)(hw, tgt, dr, dec, target_speedup)


def anchors(rows, known_alpha):
    """Row index of each row's series anchor (its smallest-batch row) where the series gives no
    acceptance, else -1."""
    idx, names = measured.series_index(rows)
    out = np.full(len(rows), -1)
    for s in range(len(names)):
        members = np.flatnonzero(idx == s)
        if np.isnan(known_alpha[members]).all():
            out[members] = min(members, key=lambda i: (rows[i].batch, i))
    return out


def resolve_alpha(rows, stacked, mode="operator", dtype=jnp.float32):
    """alpha per row and where it came from ('given', 'accepted_length', 'fitted'), anchor flags."""
    hw, tgt, dr, dec = stacked
    n = len(rows)
    alpha = np.full(n, np.nan)
    source = np.array(["fitted"] * n, dtype=object)
    for i, r in enumerate(rows):
        if r.alpha is not None:
            alpha[i], source[i] = r.alpha, "given"
        elif r.tau is not None:
            alpha[i] = float(alpha_from_tokens(jnp.asarray(r.tau, dtype), jnp.asarray(r.k, dtype)))
            source[i] = "accepted_length"
    anchor = np.zeros(n, bool)
    idx, names = measured.series_index(rows)
    need = [s for s in range(len(names)) if np.isnan(alpha[idx == s]).all()]
    if need:
        anchors = [min(np.flatnonzero(idx == s), key=lambda i: (rows[i].batch, i)) for s in need]
        sel = np.asarray(anchors)
        sub = jax.tree.map(lambda x: x[sel], (hw, tgt, dr, dec))
        target = jnp.asarray([rows[i].speedup for i in anchors], dtype)
        fitted = np.asarray(fit_alpha(*sub, target, mode))
        for s, a_row, a in zip(need, anchors, fitted):
            alpha[idx == s] = a
            anchor[a_row] = True
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
    stacked = measured.stack(rows, profiles, dtype)
    alpha, source, anchor = resolve_alpha(rows, stacked, mode, dtype)
    hw, tgt, dr, dec = stacked
    dec = dec.replace(alpha=jnp.asarray(alpha, dec.alpha.dtype))
    s_pred, status = (np.asarray(x) for x in predict(hw, tgt, dr, dec, mode))
    meas = np.array([r.speedup for r in rows])
    df = pl.DataFrame(dict(
        line=[r.line for r in rows], series=[r.series for r in rows], source=[r.source for r in rows],
        target=[r.target for r in rows], drafter=[r.drafter for r in rows], draft=[r.draft or "" for r in rows],
        hardware=[r.hardware for r in rows], tp=[r.tp for r in rows], batch=[r.batch for r in rows],
        k=[r.k for r in rows], context=[r.context for r in rows], alpha=alpha, alpha_source=list(source),
        anchor=anchor, measured_speedup=meas, predicted_speedup=s_pred.astype(np.float64),
        ape=np.abs(s_pred / meas - 1.0), side_ok=(s_pred > 1.0) == (meas > 1.0),
        status=[STATUS[int(c)] for c in status]))
    return df, summarize(df)
