"""How well the model predicts measured speedups: the validation protocol of docs/model.md §13.

- Acceptance comes from the row (alpha, or alpha solved from the accepted length tau). Where a row
  gives neither, one alpha is fitted per acceptance group (`Row.acceptance_group`: target, drafter,
  draft and dataset, shared across k and batch; the series where there is no dataset column) so that
  the model matches the group's anchor row exactly (its smallest batch, then smallest k). Anchors are
  reported, never scored.
- A row whose speedup exceeds its accepted length (impossible when verifying costs at least one decode
  pass) is `inconsistent`: flagged, not scored. A row the model cannot represent is `unsupported`:
  skipped with its reason and counted, never aborting the file; so is a row the model gives no finite
  prediction (a request whose prompt does not fit: its status says so), which would null every metric.
- Scored rows split into level rows (batch 1 with a given acceptance: the absolute speedup) and shape
  rows (everything else: how the speedup moves with batch, k and context).
- Rows per request rate (docs/model.md §10: qps, input_len, output_len, measured_ratio = baseline /
  speculative latency, `metric` tpot or e2e_request_latency) are predicted by the serving fixed point
  (`rate_ratio`), rows at a closed-loop concurrency (docs/model.md §11: concurrency in place of qps, the
  metrics of `measured.METRICS["concurrency"]`) by the closed loop (`closed_ratio`), both through
  `load_ratio`; acceptance is handled alike, anchored at a group's lowest rate or concurrency (on a
  metric that rises with acceptance: `measured.NO_ALPHA`), and a series' lowest rate or concurrency with
  a given acceptance is its level row. Metrics: median and 90th
  percentile absolute percentage error, side-of-1.0 accuracy, median within-series Spearman, overall,
  for level and shape, per load kind (`by_load`: batch, qps, concurrency) and per source, engine and
  hardware (`groups`). A metric over no rows is None with a reason.
- Plain step times (`inputs.steps`: no speculation, at a closed-loop concurrency, a request rate or a
  decode batch) are scored in their own block (`plain_steps`) on the predicted plain time of the metric
  the row names (`plain_metric`); a concurrency goes through the closed loop of docs/model.md §11
  (`plain_at_concurrency`).
- Headline numbers are also source-balanced (`source_balanced`): the median over sources of each
  source's median APE, and the worst source, so that one source with many easy rows cannot carry the
  pooled median.
"""

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl

from .. import store
from ..cost._search import bisect
from ..cost.acceptance import alpha_from_tokens, alpha_from_tree_tokens
from ..cost.speculative import step
from ..cost.status import Closed, Point, Serving
from ..inputs import cells, engines, measured, steps
from ..search import concurrency as _concurrency
from ..search import serving

ROLES = ("level", "shape", "anchor", "inconsistent", "unsupported")  # what each row is in the protocol


def rate_ratio(h, p, t, d, x, e2e):
    """A row per request rate (docs/model.md §10): the TPOT ratio, or with `e2e` the ratio of request
    latencies once admitted (TTFT without the queue + (L_out - 1) TPOT: a saturated side's queue wait,
    which a finite benchmark measures only in part, is not predicted; its status says saturated)."""
    m = serving.sides(h, p, t, d, x)
    s = serving.serve(h, p, t, d, x, model=m)
    base, sd = (serving.admitted_latencies(v.iteration_s, v.tpot_s, x.load, m.c_p[i])[1]
                for i, v in enumerate((s.base, s.sd)))
    return jnp.where(e2e, base / sd, s.speedup_tpot), s.status


CLOSED_FIELDS = tuple(measured.METRICS["concurrency"].values())  # per metric code (`metric_codes`)


def closed_ratio(h, p, t, d, x, metric):
    """A row at closed-loop concurrency `x.load.concurrency` (docs/model.md §11, `search.concurrency.closed`):
    the ratio baseline / speculative at equal N of the `ClosedSide` field its metric names (`metric`: an
    index into `measured.METRICS["concurrency"]`), and the `status.Closed` code."""
    c = _concurrency.closed(h, p, t, d, x)
    ratios = [getattr(c.base, f) / getattr(c.sd, f) for f in CLOSED_FIELDS]
    return jnp.select([metric == i for i in range(len(ratios))], ratios, jnp.nan), c.status


def load_ratio(h, p, t, d, x, kind, metric):
    """A row at load `kind` ("qps" or "concurrency", static): its predicted ratio and status code (a
    `status.Serving` code at a rate, a `status.Closed` one at a concurrency); `metric`: the index of the
    row's metric in `measured.METRICS[kind]`."""
    if kind == "qps":
        return rate_ratio(h, p, t, d, x, metric == measured.METRICS["qps"].index("e2e_request_latency"))
    return closed_ratio(h, p, t, d, x, metric)


STATUS = {"batch": Point, "qps": Serving, "concurrency": Closed}  # the status table of each load kind's codes


@store.jit
def predict(hw, deploy, tgt, dr, dec):
    """Speedup and point status for stacked rows (leading axis = row)."""
    r = jax.vmap(step)(hw, deploy, tgt, dr, dec)
    return r.speedup, r.status


@store.jit(static_argnames=("kind",))
def predict_load(hw, deploy, tgt, dr, dec, metric, kind):
    """Ratio and status code (`STATUS[kind]`) for stacked rows of one load kind, "qps" or "concurrency"."""
    return jax.vmap(lambda *a: load_ratio(*a[:5], kind, a[5]))(hw, deploy, tgt, dr, dec, metric)


def metric_codes(rows):
    """Per row at load: the index of its metric in `measured.METRICS[kind]` (the `metric` of `load_ratio`)."""
    return jnp.asarray([list(measured.METRICS[r.load_kind]).index(r.metric) for r in rows])


def matching_alpha(h, p, t, d, x, s_meas, iters=50, kind=None, metric=None):
    """alpha in [0, 1] with S(alpha) = s_meas at one row (S increases with alpha; clipped at the ends);
    with `kind` ("qps" or "concurrency") and `metric`, S is the row's ratio at that load (`load_ratio`).

    Differentiable in the other inputs: bisection gives the value, one Newton step with a stopped
    derivative gives, by the implicit function theorem, d alpha / d theta = -(dS/d theta) / (dS/d alpha)
    (used by calibration)."""
    def s_of(a, hh):
        if kind is not None:  # a row at a request rate or a concurrency: its ratio
            return load_ratio(hh, p, t, d, x.replace(alpha=a), kind, metric)[0]
        return step(hh, p, t, d, x.replace(alpha=a)).speedup

    h_const = jax.lax.stop_gradient(h)
    a0 = jax.lax.stop_gradient(bisect(lambda a: s_of(a, h_const) < s_meas, jnp.zeros_like(s_meas),
                                      jnp.ones_like(s_meas), iters))
    res = s_of(a0, h) - s_meas
    slope = jax.lax.stop_gradient(jax.grad(s_of)(a0, h))
    inside = (jnp.abs(jax.lax.stop_gradient(res)) < 1e-3 * s_meas) & (slope > 0)
    return jnp.where(inside, a0 - res / jnp.where(inside, slope, 1.0), a0)


@store.jit(static_argnames=("kind",))
def fit_alpha(hw, deploy, tgt, dr, dec, target_speedup, metric=None, kind=None):
    """Per stacked row: the alpha that makes the model match `target_speedup` there (rows at load `kind`,
    "qps" or "concurrency": matched on the ratio their `metric` code names, one per row)."""
    if kind is None:
        return jax.vmap(matching_alpha)(hw, deploy, tgt, dr, dec, target_speedup)
    return jax.vmap(lambda *a: matching_alpha(*a[:6], kind=kind, metric=a[6]))(hw, deploy, tgt, dr, dec,
                                                                               target_speedup, metric)


def known_alpha(rows, dtype=jnp.float32):
    """alpha per row where the row gives it (directly or as an accepted length), NaN elsewhere,
    and its source ('given', 'accepted_length', 'fitted'). Chain accepted lengths are solved in one
    vmapped call; a tree's through its estimate."""
    alpha = np.full(len(rows), np.nan)
    source = np.array(["fitted"] * len(rows), dtype=object)
    chains, trees = [], []
    for i, r in enumerate(rows):
        if r.alpha is not None:
            alpha[i], source[i] = r.alpha, "given"
        elif r.tau is not None:
            source[i] = "accepted_length"
            wide = r.tree_topk is not None and not (r.tree_topk == 1 and r.tree_tokens == r.k + 1)
            (trees if wide else chains).append(i)
    def column(idx, *names):
        return [jnp.asarray(np.asarray([getattr(rows[i], n) for i in idx], dtype=np.dtype(dtype))) for n in names]

    if chains:
        alpha[chains] = np.asarray(_alphas(*column(chains, "tau", "k")))
    if trees:
        alpha[trees] = np.asarray(_tree_alphas(*column(trees, "tau", "tree_topk", "tree_tokens", "k")))
    return alpha, source


@store.jit
def _alphas(tau, k):
    """alpha of each chain row from its accepted length (vmapped)."""
    return jax.vmap(alpha_from_tokens)(tau, k)


@store.jit
def _tree_alphas(tau, topk, tokens, k):
    """alpha of each tree row from its accepted length through the tree estimate (vmapped)."""
    return jax.vmap(alpha_from_tree_tokens)(tau, topk, tokens, k)


def anchors(rows, known):
    """Row index of each row's acceptance-group anchor (smallest batch, request rate or concurrency, then
    smallest k, among rows whose metric rises with acceptance: not `measured.NO_ALPHA`) where the row
    gives no acceptance, else -1; -2 where its group has no row to anchor at."""
    out = np.full(len(rows), -1)
    groups = {}
    for i, r in enumerate(rows):
        if np.isnan(known[i]):
            groups.setdefault(r.acceptance_group, []).append(i)
    for members in groups.values():
        fits = [i for i in members if rows[i].metric not in measured.NO_ALPHA]
        out[members] = min(fits, key=lambda i: (rows[i].load_value, rows[i].k, i)) if fits else -2
    return out


def inconsistent(rows):
    """True where the measured speedup exceeds the accepted length (known tau, tau from a given alpha,
    or at most k + 1). Ratios of iterations or of TTFT (`measured.NO_ALPHA`) are not per-token speedups:
    never flagged."""
    out = np.zeros(len(rows), bool)
    for i, r in enumerate(rows):
        if r.metric in measured.NO_ALPHA:
            continue
        tau = r.tau if r.tau is not None else (sum(r.alpha ** j for j in range(r.k + 1))
                                               if r.alpha is not None else float(r.k + 1))
        out[i] = r.speedup > tau * (1 + 1e-9)
    return out


def resolve_alpha(rows, stacked, dtype=jnp.float32):
    """alpha per row, where it came from ('given', 'accepted_length', 'fitted'; 'none' and NaN where its
    group has no row to fit it at), anchor flags. `rows` are all of one load kind (stacked apart)."""
    alpha, source = known_alpha(rows, dtype)
    anchor_of = anchors(rows, alpha)
    source[anchor_of == -2] = "none"
    sel = np.unique(anchor_of[anchor_of >= 0])
    if sel.size:
        sub = jax.tree.map(lambda x: x[sel], stacked)
        kind = rows[0].load_kind
        load = {} if kind == "batch" else dict(metric=metric_codes([rows[i] for i in sel]), kind=kind)
        fitted = np.asarray(fit_alpha(*sub, jnp.asarray([rows[i].speedup for i in sel], dtype), **load))
        by_anchor = dict(zip(sel.tolist(), fitted))
        for i, a in enumerate(anchor_of):
            if a >= 0:
                alpha[i] = by_anchor[a]
    return alpha, source, anchor_of == np.arange(len(rows))


def _spearman(df):
    per = (df.group_by("series").agg(pl.len().alias("n"), pl.corr("predicted_speedup", "measured_speedup",
                                                                    method="spearman").alias("rho"))
           .filter((pl.col("n") >= 3) & pl.col("rho").is_not_nan() & pl.col("rho").is_not_null()))
    return float(per["rho"].median()) if per.height else None


def metrics(df):
    """Metrics over the scored rows (roles level and shape) of a per-row table. None where no row is
    scored, with `reason`."""
    scored = df.filter(pl.col("role").is_in(["level", "shape"]))
    ape = scored["ape"].to_numpy()
    if not ape.size:
        return dict(rows_scored=0, median_ape=None, p90_ape=None, side_accuracy=None, spearman_median=None,
                    reason="no scored rows (every row is an anchor, inconsistent or unsupported)")
    return dict(rows_scored=int(ape.size), median_ape=float(np.median(ape)), p90_ape=float(np.percentile(ape, 90)),
                side_accuracy=float(scored["side_ok"].mean()), spearman_median=_spearman(df))


def source_balanced(df, roles=("level", "shape")):
    """The source-balanced headline of docs/model.md §13 over the scored rows (roles level and shape) of a
    per-row table with `source` and `ape` columns: `source_balanced_median_ape` (the median over sources
    of each source's median APE; `roles`: the roles scored), `worst_source` ({"source", "median_ape"}: the
    source with the largest median APE; ties: the first by name) and `sources_scored`. None values (with
    0 sources) where no row is scored."""
    scored = df.filter(pl.col("role").is_in(list(roles)) & pl.col("ape").is_not_null())
    per = scored.group_by("source").agg(pl.col("ape").median().alias("m")).sort("source")
    if not per.height:
        return dict(source_balanced_median_ape=None, worst_source=None, sources_scored=0)
    worst = per.sort("m", descending=True, maintain_order=True).row(0, named=True)
    return dict(source_balanced_median_ape=float(np.median(per["m"].to_numpy())),
                worst_source=dict(source=worst["source"], median_ape=float(worst["m"])),
                sources_scored=int(per.height))


def plain_at_concurrency(h, p, t, d, x, n):
    """The plain side at closed-loop concurrency `n` (one row; `x.load` gives the lengths and the
    engine's limits): the closed loop of docs/model.md §11 (`search.concurrency.closed`), its `ClosedSide`
    (request throughput X with n = X E2E, the decode batch, ITL, TPOT, TTFT, E2E; excess clients queue
    for a slot beyond the batch cap)."""
    return _concurrency.closed(h, p, t, d, x, concurrency=n).base


METRIC_CODES = tuple(steps.METRICS)  # the order of `plain_metric`'s codes


LOAD_KINDS = cells.LOADS  # a row's load, coded by its index (`plain_metric`'s kind)


def _pick(table, metric, dtype):
    """The value of the metric coded `metric` (an index of `METRIC_CODES`) in `table` (name -> value)."""
    return jnp.select([metric == i for i in range(len(METRIC_CODES))],
                      [jnp.asarray(table[name], dtype) for name in METRIC_CODES], jnp.nan)


def plain_at(kind, h, p, t, d, x, n, metric):
    """One plain row's predicted `value_s` for `metric` under a load of one kind (a `LOAD_KINDS` name),
    and the decode batch:

    - concurrency n (the closed loop): tpot is its TPOT (= one iteration, prefill share included), itl the
      same iteration, itl_p50 (LLMPerf) and inv_tput n / (X L_out), e2e_request_latency n / X (queueing
      included);
    - qps (x.load.qps, the open loop): tpot and itl as above, itl_p50 and inv_tput E2E / L_out (Little's
      law), e2e_request_latency E2E;
    - batch (x.batch, offline): every per-token metric is the pure decode step T_target(B, 1), E2E is
      L_out of them, and decode_step is that step (NaN under a load: no row carries one there)."""
    l_out = x.load.output_len
    if kind == "concurrency":
        side = plain_at_concurrency(h, p, t, d, x, n)
        per_client = n / (side.throughput_req_s * l_out)
        table = dict(tpot=side.tpot_s, itl=side.iteration_s, itl_p50=per_client, inv_tput=per_client,
                     e2e_request_latency=side.e2e_s, decode_step=jnp.nan)
    elif kind == "qps":
        side = serving.serve(h, p, t, d, x).base
        table = dict(tpot=side.tpot_s, itl=side.iteration_s, itl_p50=side.e2e_s / l_out, inv_tput=side.e2e_s / l_out,
                     e2e_request_latency=side.e2e_s, decode_step=jnp.nan)
    else:
        t_b = step(h, p, t, d, x).t_target_s
        side = None
        table = dict(tpot=t_b, itl=t_b, itl_p50=t_b, inv_tput=t_b, e2e_request_latency=l_out * t_b, decode_step=t_b)
    dtype = x.load.output_len.dtype
    return _pick(table, metric, dtype), (x.batch if side is None else side.batch)


def plain_metric(h, p, t, d, x, kind, n, metric):
    """`plain_at` for a row whose load kind is the traced code `kind` (an index of `LOAD_KINDS`): every
    kind is evaluated and the row's selected (a stacked table of mixed rows is one vmap)."""
    out = [plain_at(k, h, p, t, d, x, n, metric) for k in LOAD_KINDS]
    return tuple(jnp.select([kind == 0, kind == 1], [o[i] for o in out[:2]], out[2][i]) for i in (0, 1))


def plain_codes(rows, dtype):
    """(kind, concurrency, metric) arrays of plain rows: each row's `LOAD_KINDS` and `METRIC_CODES` index and
    its clients (1 where it has none)."""
    return (jnp.asarray([LOAD_KINDS.index(r.load_kind) for r in rows]),
            jnp.asarray([float(r.concurrency or 1) for r in rows], dtype),
            jnp.asarray([METRIC_CODES.index(r.metric) for r in rows]))


@store.jit
def predict_plain(hw, deploy, tgt, dr, dec, kind, n, metric):
    """`plain_metric` for stacked rows (leading axis = row)."""
    return jax.vmap(plain_metric)(hw, deploy, tgt, dr, dec, kind, n, metric)


def evaluate_steps(rows, engine=None, profiles=None, mode="operator", dtype=jnp.float32):
    """Predict every plain step-time row (`inputs.steps.StepRow`); a per-row table with kind
    "step_time", role "step" (scored), "unsupported" or "not_predicted" (no finite prediction: the model
    does not fit)."""
    n = len(rows)
    pred, batch = np.full(n, np.nan), np.full(n, np.nan)
    profile = np.array([""] * n, dtype=object)
    idx = np.array([i for i, r in enumerate(rows) if not r.unsupported], dtype=int)
    fixed = engines.load(engine) if isinstance(engine, str) else engine  # --engine NAME|FILE, as given
    if idx.size:
        part = [rows[i] for i in idx]
        used = [fixed or measured.engine_profile(r.engine_name, profiles) for r in part]
        stacked = steps.stack(part, used, dtype, mode)
        v, b = predict_plain(*stacked, *plain_codes(part, dtype))
        pred[idx], batch[idx] = np.asarray(v, np.float64), np.asarray(b, np.float64)
        profile[idx] = [p.slug for p in used]
    meas = np.array([r.value_s for r in rows])
    ok = np.isfinite(pred) & (pred > 0)
    role = ["unsupported" if r.unsupported else ("step" if ok[i] else "not_predicted") for i, r in enumerate(rows)]
    note = [r.unsupported or ("" if ok[i] else "no finite prediction (the model does not fit this layout)")
            for i, r in enumerate(rows)]
    df = pl.DataFrame(dict(
        line=[r.line for r in rows], series=[r.series for r in rows],
        source=[r.source for r in rows], engine=[r.engine or "(unspecified)" for r in rows],
        engine_profile=list(profile), target=[r.target for r in rows], hardware=[r.hardware for r in rows],
        tp=[r.tp for r in rows], ep=[r.ep for r in rows], dp_attention=[r.dp_attention for r in rows],
        concurrency=[r.concurrency for r in rows], qps=[r.qps for r in rows], batch=[r.batch for r in rows],
        input_len=[r.input_len for r in rows], output_len=[r.output_len for r in rows],
        metric=[r.metric for r in rows], measured_s=meas, predicted_s=np.where(ok, pred, np.nan),
        predicted_batch=batch, ratio=np.where(ok, pred / meas, np.nan),
        ape=np.where(ok, np.abs(pred / meas - 1), np.nan), role=role, note=note, kind=["step_time"] * n),
        schema_overrides=dict(concurrency=pl.Int64, qps=pl.Float64, batch=pl.Float64))
    return df.with_columns(pl.col("predicted_s", "predicted_batch", "ratio", "ape").fill_nan(None))


def summarize_steps(df):
    """The plain step-time block: rows, scored rows, median and p90 APE, median predicted / measured
    ratio (below 1: the model is fast), the source-balanced headline, per source / engine / hardware /
    metric groups, and the reasons of unsupported rows."""
    def stats(g):
        s = g.filter(pl.col("role") == "step")
        if not s.height:
            return dict(rows_scored=0, median_ape=None, p90_ape=None, median_ratio=None)
        ape = s["ape"].to_numpy()
        return dict(rows_scored=int(s.height), median_ape=float(np.median(ape)),
                    p90_ape=float(np.percentile(ape, 90)), median_ratio=float(np.median(s["ratio"].to_numpy())))

    out = dict(rows=int(df.height), **stats(df), **source_balanced(df, roles=("step",)),
               rows_unsupported=int((df["role"] == "unsupported").sum()),
               rows_not_predicted=int((df["role"] == "not_predicted").sum()),
               unsupported_reasons=df.filter(pl.col("role") != "step")["note"].unique().sort().to_list())
    out["groups"] = {key: {str(v): m for (v,), g in df.sort(key).group_by([key], maintain_order=True)
                           if (m := stats(g))["rows_scored"]}
                     for key in ("source", "engine", "hardware", "metric")}
    return out


GROUP_KEYS = ("rows_scored", "median_ape", "p90_ape", "side_accuracy")  # per group and per load kind


def summarize(df):
    """Overall, level and shape metrics (with the source-balanced headline), row counts by role, per load
    kind (`by_load`: batch, qps, concurrency present in the table; each with its rows, scored metrics,
    source-balanced median and its level and shape metrics) and per source / engine / hardware groups;
    plain step-time rows (kind "step_time") in their own block, `plain_steps` (`summarize_steps`)."""
    plain = df.filter(pl.col("kind") == "step_time") if "kind" in df.columns else None
    if plain is not None:
        df = df.filter(pl.col("kind") != "step_time")
    counts = {r: int((df["role"] == r).sum()) for r in ROLES}
    out = dict(rows=int(df.height), **metrics(df), **source_balanced(df), rows_anchor=counts["anchor"],
               rows_inconsistent=counts["inconsistent"], rows_unsupported=counts["unsupported"],
               rows_skipped=counts["anchor"] + counts["inconsistent"] + counts["unsupported"])
    reasons = df.filter(pl.col("role") == "unsupported")["note"].unique().sort().to_list()
    out["unsupported_reasons"] = reasons
    out["level"] = metrics(df.filter(pl.col("role") != "shape"))
    out["shape"] = metrics(df.filter(pl.col("role") != "level"))
    if "load_kind" in df.columns:  # per load kind (the acceptance bars of rows at load are per kind)
        out["by_load"] = {kind: dict(rows=int(g.height), **{k: m[k] for k in GROUP_KEYS},
                                     source_balanced_median_ape=source_balanced(g)["source_balanced_median_ape"],
                                     level=metrics(g.filter(pl.col("role") != "shape")),
                                     shape=metrics(g.filter(pl.col("role") != "level")))
                          for kind in STATUS if (g := df.filter(pl.col("load_kind") == kind)).height
                          for m in (metrics(g),)}
    out["groups"] = {key: {str(v): {k: m[k] for k in GROUP_KEYS}
                           for (v,), g in df.sort(key).group_by([key], maintain_order=True)
                           if (m := metrics(g))["rows_scored"]}
                     for key in ("source", "engine", "hardware")}
    if plain is not None and plain.height:
        out["plain_steps"] = summarize_steps(plain)
    return out


def evaluate(rows, engine=None, profiles=None, mode="operator", dtype=jnp.float32):
    """Predict every row; returns (per-row polars DataFrame, summary dict).

    `engine` (name, path or `EngineProfile`) applies one engine to every row; None applies each row's
    `engine` column (empty: `measured.DEFAULT_ENGINE`), from `profiles` or the presets. Plain step-time
    rows (`inputs.steps`) are predicted by `evaluate_steps` and appended to the table (kind "step_time")."""
    plain = [r for r in rows if r.is_step]
    rows = [r for r in rows if not r.is_step]
    df = _evaluate_speedups(rows, engine, profiles, mode, dtype)
    if plain:
        df = pl.concat([df, evaluate_steps(plain, engine, profiles, mode, dtype)], how="diagonal_relaxed")
    return df, summarize(df)


def _evaluate_speedups(rows, engine, profiles, mode, dtype):
    """The per-row table of speedup rows (kind "speedup")."""
    n = len(rows)
    alpha = np.full(n, np.nan)
    source = np.array(["none"] * n, dtype=object)
    anchor = np.zeros(n, bool)
    s_pred = np.full(n, np.nan)
    status = np.array([Point.INVALID_INPUT.label] * n, dtype=object)
    engine_used = np.array([""] * n, dtype=object)
    fixed = engines.load(engine) if isinstance(engine, str) else engine  # --engine NAME|FILE, as given
    for kind in STATUS:  # rows per batch, per request rate and at a concurrency: stacked and predicted apart
        idx = np.array([i for i, r in enumerate(rows) if not r.unsupported and r.load_kind == kind], dtype=int)
        if not idx.size:
            continue
        part = [rows[i] for i in idx]
        stacked = measured.stack(part, engine, profiles, dtype, mode)
        a, src, anc = resolve_alpha(part, stacked, dtype)
        hw, deploy, tgt, dr, dec = stacked
        dec = dec.replace(alpha=jnp.asarray(np.nan_to_num(a, nan=0.5), dec.alpha.dtype))  # NaN: no acceptance
        if kind == "batch":
            sp, st = predict(hw, deploy, tgt, dr, dec)
        else:
            sp, st = predict_load(hw, deploy, tgt, dr, dec, metric_codes(part), kind)
        status[idx] = STATUS[kind].decode(np.asarray(st))
        alpha[idx], source[idx], anchor[idx] = a, src, anc
        s_pred[idx] = np.where(np.isnan(a), np.nan, np.asarray(sp, np.float64))
        engine_used[idx] = [(fixed or measured.engine_profile(r.engine_name, profiles)).slug for r in part]
    meas = np.array([r.speedup for r in rows])
    bad = inconsistent(rows)
    lowest = {}  # a series' lowest request rate or concurrency: its level row (the analogue of batch 1)
    for r in rows:
        if r.load_kind != "batch":
            key = (r.series, r.load_kind)
            lowest[key] = min(lowest.get(key, r.load_value), r.load_value)
    role, note = [], []
    for i, r in enumerate(rows):
        if r.unsupported:
            role.append("unsupported"), note.append(r.unsupported)
        elif source[i] == "none":
            role.append("unsupported"), note.append(f"no acceptance: {' and '.join(measured.NO_ALPHA)} ratios do "
                                                    "not identify it; give acceptance_rate or accepted_length")
        elif not np.isfinite(s_pred[i]):  # e.g. a prompt whose KV cache does not fit: skipped, never scored
            st = STATUS[r.load_kind].of(status[i])
            role.append("unsupported"), note.append(f"not predicted: status {st.label} ({st.text()})")
        elif bad[i]:
            role.append("inconsistent"), note.append("measured speedup above the accepted length")
        elif anchor[i]:
            role.append("anchor"), note.append("alpha fitted here")
        elif (r.load_value == lowest[(r.series, r.load_kind)] if r.load_kind != "batch" else r.batch == 1) \
                and (r.alpha, r.tau) != (None, None):
            role.append("level"), note.append("")
        else:
            role.append("shape"), note.append("")
    df = pl.DataFrame(dict(
        line=[r.line for r in rows], series=[r.series for r in rows], source=[r.source for r in rows],
        engine=[r.engine or "(unspecified)" for r in rows], engine_profile=list(engine_used),
        target=[r.target for r in rows], drafter=[r.drafter for r in rows], draft=[r.draft or "" for r in rows],
        hardware=[r.hardware for r in rows], tp=[r.tp for r in rows], ep=[r.ep for r in rows],
        dp_attention=[r.dp_attention for r in rows], tree_topk=[r.tree_topk or 1 for r in rows],
        tree_tokens=[r.tree_tokens or r.k + 1 for r in rows], load_kind=[r.load_kind for r in rows],
        batch=[r.batch if r.load_kind == "batch" else None for r in rows], qps=[r.qps for r in rows],
        concurrency=[r.concurrency for r in rows], metric=[r.metric for r in rows], k=[r.k for r in rows],
        context=[r.context for r in rows], alpha=alpha, alpha_source=list(source),
        anchor=anchor, role=role, note=note, measured_speedup=meas, predicted_speedup=s_pred,
        ape=np.abs(s_pred / meas - 1.0), side_ok=(s_pred > 1.0) == (meas > 1.0), status=list(status),
        kind=["speedup"] * n),
        schema_overrides=dict(batch=pl.Float64, qps=pl.Float64, concurrency=pl.Int64))
    return df.with_columns(pl.col("alpha", "predicted_speedup", "ape").fill_nan(None))
