"""Figures from result grids and from the point model (matplotlib, headless).

Each `*_figure` function takes frames computed by the kernels (`curves`, sweep results, validation
tables), never a model of its own, and returns `(figure, data)`: `data` is the polars DataFrame
actually drawn, so tests (and users) can check the picture against the grid. `save` writes PNG and
SVG. Figures are `matplotlib.figure.Figure` objects (no pyplot, no global backend).
Palette: Okabe-Ito (colour-blind safe); batch axes are logarithmic; every axis has units.
"""

import pathlib

import matplotlib.colors
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from . import io

OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def _subplots(*args, figsize, squeeze=True, **kw):
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, squeeze=squeeze, **kw)


def _style(ax, xlabel, ylabel, title=None):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def save(fig, out):
    """Write `out`.png and `out`.svg (suffix of `out` ignored); returns the two paths."""
    base = pathlib.Path(out)
    base = base.with_suffix("") if base.suffix in (".png", ".svg") else base
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in (".png", ".svg"):
        p = base.with_name(base.name + ext)
        tmp = p.with_name(f".{p.name}.tmp")
        fig.savefig(tmp, dpi=150, bbox_inches="tight", format=ext[1:])
        tmp.replace(p)
        paths.append(p)
    return paths


def crossing(batch, speedup):
    """First batch where the curve falls below 1, interpolated in log batch (None if it never does)."""
    b, s = np.asarray(batch, float), np.asarray(speedup, float)
    below = np.flatnonzero(s < 1)
    if below.size == 0 or below[0] == 0:
        return None if below.size == 0 else float(b[0])
    i = below[0]
    lb0, lb1 = np.log(b[i - 1]), np.log(b[i])
    t = (s[i - 1] - 1) / (s[i - 1] - s[i])
    return float(np.exp(lb0 + t * (lb1 - lb0)))


def speedup_figure(df, title="Speculative-decoding speedup vs batch"):
    """Speedup vs batch (log), one line per hardware/pair (and other varying inputs), 1.0 line,
    crossovers marked, memory-infeasible parts dashed over a shaded band."""
    keys = [c for c in ("hardware", "pair") if c in df.columns]
    extra = [c for c in ("alpha", "k_tokens", "context_tokens") if c in df.columns and df[c].n_unique() > 1]
    groups = df.sort(keys + extra + ["batch_seqs"]).group_by(keys + extra, maintain_order=True)
    fig, ax = _subplots(figsize=(7.5, 4.6))
    rows = []
    for i, (key, g) in enumerate(groups):
        label = " | ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in key)
        color = OKABE_ITO[i % len(OKABE_ITO)]
        b, s = g["batch_seqs"].to_numpy(), g["speedup"].to_numpy()
        feasible = g["status"].cast(pl.String).to_numpy() == "ok"
        ax.plot(b, np.where(feasible, s, np.nan), color=color, lw=2, label=label)
        ax.plot(b, np.where(feasible, np.nan, s), color=color, lw=1.5, ls="--")
        if (~feasible).any():
            first_bad = b[np.argmax(~feasible)]
            ax.axvspan(first_bad, b.max(), color=color, alpha=0.06, lw=0)
        x = crossing(b, s)
        if x:
            ax.plot([x], [1.0], marker="o", ms=7, color=color, mec="white", zorder=5)
            ax.annotate(f"B* = {x:,.0f}", (x, 1.0), textcoords="offset points", xytext=(4, 8), color=color, fontsize=8)
        rows.append(dict(series=label, crossover_batch=x, max_speedup=float(np.nanmax(s)),
                         first_infeasible_batch=float(b[np.argmax(~feasible)]) if (~feasible).any() else None,
                         points=len(b)))
    ax.axhline(1.0, color="black", lw=1, alpha=0.7)
    ax.set_xscale("log")
    _style(ax, "decode batch (sequences, log scale)", "speedup (SD / no SD)", title)
    ax.legend(fontsize=8, frameon=False, title="solid: fits in memory; dashed+shaded: does not", title_fontsize=7)
    return fig, pl.DataFrame(rows)


def crossover_map_figure(df, x, y, title="Crossover batch B*"):
    """Heatmap of the crossover batch over two axes (log colour), with contour lines."""
    g = df.filter(pl.col("status") == "crosses").group_by(x, y).agg(pl.col("crossover_batch").median())
    xs, ys = np.sort(df[x].unique().to_numpy()), np.sort(df[y].unique().to_numpy())
    grid = np.full((len(ys), len(xs)), np.nan)
    xi = {v: i for i, v in enumerate(xs)}
    yi = {v: i for i, v in enumerate(ys)}
    for a, b, c in g.iter_rows():
        grid[yi[b], xi[a]] = c
    fig, ax = _subplots(figsize=(6.8, 4.8))
    finite = np.isfinite(grid)
    lo = np.nanmin(grid) if finite.any() else 1.0
    hi = np.nanmax(grid) if finite.any() else 10.0
    norm = matplotlib.colors.LogNorm(vmin=max(lo, 1.0), vmax=max(hi, lo * 1.01, 2.0))
    mesh = ax.pcolormesh(np.arange(len(xs) + 1) - 0.5, np.arange(len(ys) + 1) - 0.5, grid, cmap="cividis", norm=norm)
    if finite.sum() >= 4 and len(xs) > 1 and len(ys) > 1:
        levels = [v for v in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384) if lo < v < hi]
        if levels:
            cs = ax.contour(np.arange(len(xs)), np.arange(len(ys)), np.log2(np.where(finite, grid, np.nan)),
                            levels=np.log2(levels), colors="white", linewidths=0.8)
            ax.clabel(cs, fmt=lambda v: f"{2 ** v:,.0f}", fontsize=7)
    ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs], fontsize=8, rotation=45 if len(xs) > 8 else 0)
    ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys], fontsize=8)
    fig.colorbar(mesh, ax=ax, label="crossover batch B* (sequences, log)")
    _style(ax, x, y, title)
    ax.grid(False)
    if (~finite).any():
        ax.text(0.01, -0.16, "blank: no crossover (never helps / helps throughout)", transform=ax.transAxes, fontsize=7)
    return fig, g.sort(x, y)


def sensitivity_figure(results, top=12, title="What moves the crossover batch"):
    """Ranked elasticity bars, one colour per scenario. `results` maps label -> {input: elasticity}."""
    names = sorted({n for r in results.values() for n in r},
                   key=lambda n: -max(abs(r.get(n) or 0.0) for r in results.values()))
    names = [n for n in names if max(abs(r.get(n) or 0.0) for r in results.values()) > 1e-6][:top]
    fig, ax = _subplots(figsize=(7.2, 0.42 * len(names) + 1.4))
    h = 0.8 / max(len(results), 1)
    rows = []
    for j, (label, el) in enumerate(results.items()):
        vals = [el.get(n) or 0.0 for n in names]
        ax.barh(np.arange(len(names)) + j * h - 0.4 + h / 2, vals, height=h, color=OKABE_ITO[j % 8], label=label)
        rows += [dict(scenario=label, input=n, elasticity=v) for n, v in zip(names, vals)]
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    _style(ax, "elasticity of B* (% change of B* per % change of input)", "input", title)
    ax.legend(fontsize=8, frameon=False)
    return fig, pl.DataFrame(rows)


def roofline_figure(data, peak, bw, batches, k, label="", title=None):
    """The accelerator's roofline with each operator of the plain-decode (q=1) and verify (q=k+1)
    passes placed by arithmetic intensity (`data` from `curves.roofline_points`; `peak`, `bw`: the
    achieved FLOP/s and bytes/s)."""
    fig, ax = _subplots(figsize=(7.2, 4.6))
    x = np.logspace(-1, 5, 200)
    ax.plot(x, np.minimum(peak, bw * x), color="black", lw=2, label=f"roofline ({peak / 1e12:,.0f} TFLOP/s, "
                                                                      f"{bw / 1e12:.2f} TB/s)")
    ax.axvline(peak / bw, color="black", ls=":", lw=1)
    markers = {"decode": "o", "verify": "^"}
    ops = list(dict.fromkeys(data["operator"].to_list()))
    # Operators with the same dtype share an intensity (dense weights and LM head): shrinking sizes
    # and a dark edge keep every one of them visible where they coincide.
    for i, op in enumerate(ops):
        for kind in ("decode", "verify"):
            sub = data.filter((pl.col("operator") == op) & (pl.col("pass_kind") == kind))
            if sub.height:
                ax.scatter(sub["intensity"], sub["achieved_flops_per_s"], marker=markers[kind], s=150 - 28 * i,
                           color=OKABE_ITO[i], edgecolor="#333333", lw=0.6, label=f"{op}, {kind}", zorder=3 + i)
    for b in batches:  # label each batch once, at its first operator's decode point
        row = data.filter((pl.col("batch") == float(b)) & (pl.col("operator") == ops[0]) &
                          (pl.col("pass_kind") == "decode"))
        if row.height:
            ax.annotate(f"B={b:g}", (row["intensity"][0], row["achieved_flops_per_s"][0]), textcoords="offset points",
                        xytext=(-6, 8), fontsize=7, ha="right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _style(ax, "arithmetic intensity (FLOP/byte, log)", "attainable FLOP/s (log)",
           title or f"Roofline: {label} at batch {', '.join(f'{b:g}' for b in batches)} (k = {k:g})")
    ax.legend(fontsize=7, frameon=False, ncol=2)
    return fig, data


def optimal_k_figure(df, title="Best draft length k* vs batch"):
    """k* vs batch, one line per alpha (df: batch, alpha, k_star, speedup)."""
    fig, ax = _subplots(figsize=(7.2, 4.4))
    for i, ((alpha,), g) in enumerate(df.sort("alpha", "batch").group_by(["alpha"], maintain_order=True)):
        ax.step(g["batch"], g["k_star"], where="mid", color=OKABE_ITO[i % 8], lw=2, label=f"alpha = {alpha:g}")
    ax.set_xscale("log")
    _style(ax, "decode batch (sequences, log scale)", "k* (draft tokens; 0 = speculation off)", title)
    ax.legend(fontsize=8, frameon=False)
    return fig, df


def _short(label, width=34):
    """A legend label of at most `width` characters."""
    return label if len(label) <= width else label[: width - 1] + "…"


def validation_figure(panels, title="Predicted vs measured speedup"):
    """Predicted vs measured, one colour per source, alpha anchors hollow.

    `panels` is a validate per-row table, or a dict title -> table (side-by-side panels, e.g. before
    and after calibration)."""
    if isinstance(panels, pl.DataFrame):
        panels = {title: panels}
    fig, axes = _subplots(1, len(panels), figsize=(5.2 * len(panels), 5.0), squeeze=False)
    sources = sorted({s for df in panels.values() for s in df["source"].unique()})
    lim = [0.5, max(4.0, max(float(df["measured_speedup"].max()) for df in panels.values()) * 1.1)]
    frames = []
    for ax, (name, df) in zip(axes[0], panels.items()):
        for i, src in enumerate(sources):
            g = df.filter(pl.col("source") == src)
            for anchor, face in ((False, OKABE_ITO[i % 8]), (True, "none")):
                sub = g.filter(pl.col("anchor") == anchor)
                if sub.height:
                    ax.scatter(sub["measured_speedup"], sub["predicted_speedup"], s=20, facecolor=face,
                               edgecolor=OKABE_ITO[i % 8],
                               label=f"{_short(src)}{' (alpha anchor)' if anchor else ''}")
        ax.plot(lim, lim, color="black", lw=1)
        ax.axhline(1, color="grey", lw=0.6)
        ax.axvline(1, color="grey", lw=0.6)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        _style(ax, "measured speedup", "predicted speedup", name)
        if ax is axes[0][0]:
            ax.legend(fontsize=7, frameon=False, loc="upper left")
        frames.append(df.select("series", "source", "measured_speedup", "predicted_speedup", "anchor")
                      .with_columns(pl.lit(name).alias("panel")))
    return fig, pl.concat(frames)


def from_sweep(out):
    """Collect a sweep directory for plotting."""
    return io.read_results(out).collect()
