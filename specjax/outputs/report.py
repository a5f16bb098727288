"""`specjax report SPEC --out DIR`: a self-contained, offline index.html of a finished sweep.

The command runs the sweep into DIR/data through the sweep engine's public `sweep.run`; this module
only reads its results back (`io.read_results`) and renders them.

Figures are inline SVG (no scripts, no network), key numbers are HTML tables, and the
assumptions (spec text, hardware and model presets with their sources, package versions) are
printed in full, so the page can be archived and read anywhere.
"""

import datetime
import html
import pathlib

import numpy as np
import polars as pl

from ..inputs import engines
from ..inputs import hardware as _hw
from .. import catalogue
from ..cost.status import Curve, Serving
from ..search import crossover, serving
from . import io, plots, summary
from ..inputs import models

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0;max-width:100%}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;max-width:26em;overflow-wrap:anywhere}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}pre{background:#f7f7f7;padding:1em;overflow:auto}
figure{margin:1.5em 0}.t{overflow-x:auto}figcaption{font-size:13px;color:#555}h1{font-size:1.6em}h2{margin-top:1.6em}"""


def _table(df, digits=4):
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = []
    for row in df.iter_rows():
        cells = []
        for v in row:
            if isinstance(v, float):
                v = f"{v:.{digits}g}"
            cells.append(f"<td>{html.escape(str(v) if v is not None else '–')}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='t'><table><tr>{head}</tr>{''.join(body)}</table></div>"


def _transposed(summ):
    """The summary with one column per (hardware, pair) and one row per metric (fits the page); with
    more than 6 combinations, one row per combination instead (the columns would not fit)."""
    if summ.height > 6:
        return summ
    names = [f"{h} / {p}" for h, p in zip(summ["hardware"], summ["pair"])]
    metrics = [c for c in summ.columns if c not in ("hardware", "pair")]
    return pl.DataFrame({"metric": metrics, **{n: [summ[m][i] for m in metrics] for i, n in enumerate(names)}},
                        strict=False)


def _svg(fig, out_dir, name):
    png, svg = plots.save(fig, out_dir / name)
    text = svg.read_text()
    return text[text.index("<svg"):]


def figures(df, spec, out_dir):
    """(caption, inline svg) for each figure the grid supports."""
    figs = []
    cols = df.columns
    varying = [i.column for i in catalogue.AXES.values() if i.column in cols and df[i.column].n_unique() > 1]
    if "speedup" in cols and "batch_seqs" in cols:
        fig, _ = plots.speedup_figure(df)
        figs.append(("Speedup vs batch. Dots: the switch-off batch B_off (the last crossing of S = 1); shaded: "
                     "dips where S < 1 below B_off; faint: the batch does not fit in memory with the drafter.",
                     _svg(fig, out_dir, "speedup")))
    combos = df.select("hardware", "pair").unique().height
    if "crossover_batch" in cols and df["pair"].n_unique() > 1 and varying:
        fig, _ = plots.switch_off_by_pair_figure(df, bars=varying[0], bound=spec.batch_max,
                                                 order=[p.label for p in spec.pairs])
        figs.append((f"Switch-off batch B_off per pair, one bar per {varying[0]} (median over the other axes); "
                     "hatched: it pays up to the search bound; black ticks: the largest batch that fits with the "
                     "drafter.", _svg(fig, out_dir, "switch-off-by-pair")))
    if "crossover_batch" in cols and len(varying) >= 2 and combos <= 12:
        for (h, p), g in df.group_by(["hardware", "pair"], maintain_order=True):
            fig, _ = plots.crossover_map_figure(g, varying[0], varying[1], title=f"Switch-off batch B_off: {h}, {p}")
            figs.append((f"Switch-off batch B_off over {varying[0]} x {varying[1]} ({h}, {p}); median over the other "
                         "axes; cells without one coloured by the status of their curve.",
                         _svg(fig, out_dir, f"crossover-{h}-{p}")))
    if "speedup_tpot" in cols and "qps_req_s" in cols:
        figs += serving_figures(df, out_dir)
    elast = [c for c in cols if c.startswith("elasticity_")]
    if elast:
        res = {}
        for (p,), g in df.group_by(["pair"], maintain_order=True):
            res[p] = {c.removeprefix("elasticity_"): g[c].median() for c in elast}
        rate = spec.reduce == "switch_off_qps"
        what, short = ("the switch-off request rate", "the switch-off rate") if rate else \
            ("the switch-off batch B_off", "B_off")
        fig, _ = plots.sensitivity_figure(res, title=f"What moves {what}", of=short)
        figs.append((f"Median elasticity of {what} per input (over the grid points that have one).",
                     _svg(fig, out_dir, "sensitivity")))
    if "k_star" in cols and "batch_seqs" in cols and "alpha" in cols:
        for (h, p), g in df.group_by(["hardware", "pair"], maintain_order=True):
            kd = g.group_by("alpha", "batch_seqs").agg(pl.col("k_star").median(), pl.col("speedup_k_star").median())
            kd = kd.rename({"batch_seqs": "batch", "speedup_k_star": "speedup"})
            fig, _ = plots.optimal_k_figure(kd, title=f"Best draft length k*: {h}, {p}")
            figs.append((f"Optimal draft length vs batch ({h}, {p}).", _svg(fig, out_dir, f"optimal-k-{h}-{p}")))
    return figs


MAX_SERIES = 8  # lines per serving figure (one colour each); more are split by the first varying axis


def serving_figures(df, out_dir):
    """TPOT and batch vs request rate for a `serve` sweep, per (hardware, pair): one line pair per
    combination of the other varying axes, at most `MAX_SERIES` per figure; the switch-off rate is the
    grid's last crossing of the TPOT ratio as the rate search counts it (`serving.paying_ratio`: a rate
    only speculation cannot sustain does not pay), interpolated by `plots.crossings`."""
    out = []
    axes = [i.column for i in catalogue.AXES.values() if i.column in df.columns and i.column != "qps_req_s"
            and df[i.column].n_unique() > 1]
    for (h, p), g in df.group_by(["hardware", "pair"], maintain_order=True):
        split = axes[:1] if g.select(axes).unique().height > MAX_SERIES and axes else []
        for key, part in (g.group_by(split, maintain_order=True) if split else [((), g)]):
            series = [a for a in axes if a not in split]
            frames, marks = [], {}
            for sk, sg in (part.group_by(series, maintain_order=True) if series else [((), part)]):
                label = ", ".join(f"{plots.LABELS.get(a, a)}={v:g}" for a, v in zip(series, sk)) or p
                sg = sg.sort("qps_req_s")
                # the ratio as the search counts it: a side that saturates alone loses, whatever its TPOT ratio
                status = [Serving.of(n) for n in sg["status"].cast(pl.String)]
                ratio = serving.paying_ratio(np.array([s.sustains(False) for s in status]),
                                             np.array([s.sustains(True) for s in status]),
                                             sg["speedup_tpot"].to_numpy())
                off, _, _ = plots.crossings(sg["qps_req_s"].to_numpy(), np.asarray(ratio))
                curve = Curve(int(crossover.curve_status(crossover.below(ratio < 1.0))))
                marks[label] = dict(switch_off_qps=off, max_qps_base=None, max_qps_sd=None, curve_status=curve.label)
                frames.append(sg.select(pl.col("qps_req_s").alias("qps"), "tpot_base_s", "tpot_sd_s", "batch_base",
                                        "batch_sd", "speedup_tpot", pl.col("status").cast(pl.String))
                              .with_columns(pl.lit(label).alias("label")))
            where = ", ".join([h, p] + [f"{plots.LABELS.get(a, a)}={v:g}" for a, v in zip(split, key)])
            fig, _ = plots.serving_figure(pl.concat(frames), marks, title=f"TPOT and batch vs request rate: {where}")
            name = "serving-" + "-".join(str(x) for x in (h, p, *key))
            out.append((f"Serving load ({where}): TPOT and running batch vs request rate, without (dashed) and with "
                        "(solid) speculation; dotted: the rate where the TPOT ratio falls below 1 on the grid, or "
                        "where only speculation can no longer sustain the rate.",
                        _svg(fig, out_dir, name)))
    return out


def write(spec, data_dir, out):
    """Write OUT/index.html (and OUT/figures/) for the sweep results in `data_dir`; returns the html path."""
    out, data_dir = pathlib.Path(out), pathlib.Path(data_dir)
    df = io.read_results(data_dir).collect()
    figs = figures(df, spec, out / "figures")
    summ = summary.summarize(data_dir)
    hw_rows = []
    for h in spec.hardware:
        p = engines.load(spec.engine).apply(_hw.load(h))  # the terms the sweep ran with (engine applied)
        hw_rows.append(dict(hardware=p.slug, name=p.name, compute_dtype=spec.compute_dtype,
                            peak_tflops=p.flops_per_s.get(spec.compute_dtype, 0) / 1e12,
                            hbm_tb_s=p.hbm_bytes_per_s / 1e12, hbm_gb=p.hbm_bytes / 1e9, engine=spec.engine,
                            **{n: getattr(p, n) for n in catalogue.ENGINE}, source=p.source))  # every engine term
    model_rows = []
    for pair in spec.pairs:
        sc = spec.scenario(spec.hardware[0], pair)  # the dtypes the sweep ran with: the pair's, [fixed], the config's
        for role, slug in (("target", pair.target), ("draft", pair.draft)):
            if not slug:
                continue
            a = models.load_architecture(slug)
            m = models.eagle_head(a, a) if a.eagle_version else models.target(a)
            info = models.preset_info(slug) if slug in models.preset_slugs() else {}
            w, e, _, kv = models.dtype_names(a, sc.weight_dtype, sc.expert_dtype if role == "target" else None,
                                             sc.kv_dtype)
            model_rows.append(dict(pair=pair.label, role=role, model=slug, total_params_b=float(m.total_params) / 1e9,
                                   active_params_b=float(m.active_params) / 1e9, weights=f"{w}/{e}", kv_cache=kv,
                                   source=info.get("source_url", slug)))
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>specjax report: "
             f"{html.escape(spec.name)}</title><style>{CSS}</style></head><body>",
             f"<h1>specjax report: {html.escape(spec.name)}</h1>",
             f"<p>{html.escape(spec.description)}</p>",
             f"<p>{spec.rows:,} rows ({spec.points:,} configurations), reduction <b>{spec.reduce}</b>, roofline "
             f"<b>{spec.roofline}</b>, engine profile <b>{html.escape(spec.engine)}</b> (per-pair engines override "
             f"it), compute dtype {spec.compute_dtype}. Generated "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Data: <code>data/</code> "
             "(Parquet, hive-partitioned).</p>", "<h2>Key numbers</h2>", _table(_transposed(summ))]
    parts.append("<h2>Figures</h2>")
    for cap, svg in figs:
        parts.append(f"<figure>{svg}<figcaption>{html.escape(cap)}</figcaption></figure>")
    parts += ["<h2>Assumptions</h2><h3>Hardware</h3>", _table(pl.DataFrame(hw_rows)), "<h3>Models</h3>",
              _table(pl.DataFrame(model_rows)),
              "<p>Roofline (docs/model.md §2): per-operator max(FLOPs / peak, bytes / bandwidth) scaled by the engine "
              "profile's achieved fractions, plus its overheads ("
              + "; ".join(i.unit for i in catalogue.OVERHEADS.values()) + "; docs/model.md §2.6; all 0 for engine = "
              "roofline); uniform MoE routing; i.i.d. acceptance; two ring "
              "all-reduces per layer under tensor parallelism; memory budget 0.9 x HBM unless the spec says "
              "otherwise.</p>",
              "<h3>Sweep spec</h3>", f"<pre>{html.escape(spec.text)}</pre>", "<h3>Versions</h3>",
              _table(pl.DataFrame([io.versions()])), "</body></html>"]
    path = out / "index.html"
    io.write_bytes_atomic(path, "\n".join(parts).encode())
    return path
