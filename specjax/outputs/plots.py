"""Figures from result grids and from the point model (matplotlib, headless).

Each `*_figure` function takes frames computed by the kernels (`curves`, sweep results, validation
tables), never a model of its own, and returns `(figure, data)`: `data` is the polars DataFrame
actually drawn, so tests (and users) can check the picture against the grid. `save` writes PNG and
SVG. Figures are `matplotlib.figure.Figure` objects (no pyplot, no global backend).
Palette: Okabe-Ito (colour-blind safe); batch axes are logarithmic; every axis has units.
"""

import io as io_bytes
import pathlib

import matplotlib.colors
import matplotlib.lines
import matplotlib.patches
import matplotlib.ticker
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from ..cost.status import Curve, Point, Serving
from . import io

OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def _subplots(*args, figsize, squeeze=True, layout=None, **kw):
    fig = Figure(figsize=figsize, layout=layout)
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
    io.make_parent(base)
    paths = []
    for ext in (".png", ".svg"):
        p = base.with_name(base.name + ext)
        buf = io_bytes.BytesIO()
        fig.savefig(buf, dpi=150, bbox_inches="tight", format=ext[1:])
        io.write_bytes_atomic(p, buf.getvalue())  # a full disk: one-line error, no temporary left
        paths.append(p)
    return paths


LINESTYLES = ["-", "--", "-.", ":"]
SIZES = [340, 190, 105, 55, 24]  # roofline markers: operators sharing an intensity stay visible as rings
LABELS = {"alpha": "alpha", "k_tokens": "k", "context_tokens": "context", "hardware": "hw", "pair": ""}
STATUS_COLOURS = {Curve.HELPS_THROUGHOUT.label: "#009E73", Curve.NEVER_HELPS.label: "#D55E00",
                  Curve.HELPS_WITH_DIPS.label: "#56B4E9"}  # curves without a switch-off batch


def crossings(batch, speedup):
    """Where a sampled curve crosses S = 1, interpolated in log batch: (B_off, first crossing, dips).

    B_off: the last crossing from S >= 1 to S < 1 if the curve ends below 1 (else None); first: the
    first batch with S < 1 (None if none); dips: [from, to] intervals with S < 1 that close again."""
    b, s = np.asarray(batch, float), np.asarray(speedup, float)
    below = s < 1
    if not below.any():
        return None, None, []

    def at(i):  # crossing between samples i and i + 1
        lb0, lb1 = np.log(b[i]), np.log(b[i + 1])
        t = (s[i] - 1) / (s[i] - s[i + 1])
        return float(np.exp(lb0 + t * (lb1 - lb0)))

    down = np.flatnonzero(~below[:-1] & below[1:])
    up = np.flatnonzero(below[:-1] & ~below[1:])
    first = float(b[0]) if below[0] else at(down[0])
    b_off = at(down[-1]) if below[-1] and down.size else None
    starts = ([float(b[0])] if below[0] else []) + [at(i) for i in down]
    return b_off, first, [[a, at(j)] for a, j in zip(starts, up)]


def _label(key, names):
    return ", ".join((f"{LABELS.get(n, n)}={v:g}" if isinstance(v, float) else
                      (f"{LABELS[n]}={v}" if LABELS.get(n) else str(v))) for n, v in zip(names, key))


def _series_row(label, g):
    """The data-table row of one speedup series: its crossings, dips, best speedup, first batch that
    does not fit."""
    b, s = g["batch_seqs"].to_numpy(), g["speedup"].to_numpy()
    feasible = g["status"].cast(pl.String).to_numpy() == Point.OK.label
    b_off, first, dips = crossings(b, s)
    return dict(series=label, crossover_batch=b_off, first_crossing_batch=first, dips=len(dips),
                max_speedup=float(np.nanmax(s)),
                first_infeasible_batch=float(b[np.argmax(~feasible)]) if (~feasible).any() else None, points=len(b))


MAX_LINES, MAX_PANELS = 8, 12  # a speedup panel's lines (and legend entries), a figure's panels


def _n(df, cols):
    return df.select(cols).unique().height if cols else 1


def facets(df, keys, extra, max_lines=MAX_LINES, max_panels=MAX_PANELS):
    """How a speedup figure splits its series: (panel columns, kept values of thinned columns, note).

    Panels by hardware/pair once there are more than `max_lines` series, then by the varying input with
    the fewest values (alpha, k, context) while a panel would still hold more than `max_lines` lines. What
    is still too many (more than `max_panels` panels or `max_lines` lines) is thinned: the column with
    the most values keeps evenly spaced ones, its first and last included, and the note says which (every
    series is still in the figure's data table, `shown` false)."""
    series = keys + extra
    panel = keys if _n(df, series) > max_lines and _n(df, keys) > 1 else []

    def lines(d, pk):
        rest = [c for c in series if c not in pk]
        return d.group_by(pk or [pl.lit(0)]).agg(pl.struct(rest).n_unique().alias("n"))["n"].max() if rest else 1

    while lines(df, panel) > max_lines:
        fits = [c for c in extra if c not in panel and _n(df, panel + [c]) <= max_panels]
        if not fits:
            break
        panel = panel + [min(fits, key=lambda c: (lines(df, panel + [c]) > max_lines, _n(df, panel + [c])))]
    kept, view = {}, df
    while _n(view, panel) > max_panels or lines(view, panel) > max_lines:
        if _n(view, panel) > max_panels:  # too many panels: thin a panel column, else a line column
            over, many, limit = panel, _n(view, panel), max_panels
        else:
            over, many, limit = [c for c in series if c not in panel], lines(view, panel), max_lines
        col = max(over, key=lambda c: view[c].n_unique())
        values = view[col].unique().sort().to_list()
        if len(values) < 3:
            break
        m = min(len(values) - 1, max(2, len(values) * limit // many))
        keep = [values[i] for i in sorted({round(x) for x in np.linspace(0, len(values) - 1, m)})]
        kept[col] = keep
        view = view.filter(pl.col(col).is_in(keep))
    note = "; ".join(f"{LABELS.get(c) or c}: {len(v)} of {df[c].n_unique()} values shown "
                     f"({', '.join(f'{x:g}' if isinstance(x, float) else str(x) for x in v)})" for c, v in kept.items())
    return panel, kept, note


def speedup_figure(df, title="Speculative-decoding speedup vs batch"):
    """Speedup vs batch (log), one line per hardware/pair and varying input (alpha, k, context), 1.0
    line, the switch-off batch B_off marked on each line and given in its legend label, dips shaded,
    memory-infeasible parts dashed. At most `MAX_LINES` lines (and legend entries) a panel and
    `MAX_PANELS` panels (`facets`: panels by hardware/pair, then by inputs; beyond, evenly spaced values
    of the busiest input, said in the figure and in the table's `shown` column); within a panel colours
    and then line styles tell the series apart; legends sit outside the axes."""
    keys = [c for c in ("hardware", "pair") if c in df.columns and df[c].n_unique() > 1]
    extra = [c for c in ("alpha", "k_tokens", "context_tokens") if c in df.columns and df[c].n_unique() > 1]
    if not keys + extra:
        keys = [c for c in ("pair",) if c in df.columns]
    df = df.sort(keys + extra + ["batch_seqs"])
    panel_keys, kept, note = facets(df, keys, extra)
    full = df
    for c, v in kept.items():
        df = df.filter(pl.col(c).is_in(v))
    panels = list(df.group_by(panel_keys, maintain_order=True)) if panel_keys else [((), df)]
    ncols = min(len(panels), 2)
    nrows = -(-len(panels) // ncols)
    # constrained layout keeps each panel's outside legend and title clear of its neighbours
    fig, axes = _subplots(nrows, ncols, figsize=(6.2 * ncols + 3.2 * ncols, 3.9 * nrows), squeeze=False,
                          layout="constrained" if panel_keys else None)
    rows = []
    for ax, (pkey, pdf) in zip(axes.ravel(), panels):
        series_keys = [c for c in keys + extra if c not in panel_keys]
        few = pdf.select(series_keys).unique().height <= 3  # few lines: label B_off and the dips in the axes
        groups = pdf.group_by(series_keys, maintain_order=True) if series_keys else [((), pdf)]
        for j, (key, g) in enumerate(groups):
            label = _label(key, series_keys) or "speedup"
            color, ls = OKABE_ITO[j % len(OKABE_ITO)], LINESTYLES[(j // len(OKABE_ITO)) % len(LINESTYLES)]
            b, s = g["batch_seqs"].to_numpy(), g["speedup"].to_numpy()
            feasible = g["status"].cast(pl.String).to_numpy() == Point.OK.label
            b_off, first, dips = crossings(b, s)
            tag = (f"B_off = {b_off:,.0f}" if b_off else f"S >= 1 up to {b.max():,.0f}" if first is None
                   else f"no B_off up to {b.max():,.0f}")
            ax.plot(b, np.where(feasible, s, np.nan), color=color, lw=2, ls=ls, label=f"{label} ({tag})")
            ax.plot(b, np.where(feasible, np.nan, s), color=color, lw=1, ls=ls, alpha=0.45)
            for a, z in dips:
                ax.axvspan(a, z, color=color, alpha=0.08, lw=0)
                if few:
                    ax.annotate(f"dip {a:,.3g}-{z:,.3g}", (np.sqrt(a * z), 1.0), textcoords="offset points",
                                xytext=(0, 6 + 11 * j), ha="center", color=color, fontsize=7)
            if b_off:
                ax.plot([b_off], [1.0], marker="o", ms=7, color=color, mec="white", zorder=5)
                if few:
                    ax.annotate(f"B_off = {b_off:,.0f}", (b_off, 1.0), textcoords="offset points",
                                xytext=(6, 6 + 11 * j), color=color, fontsize=8)
            rows.append(_series_row(_label(tuple(pkey) + tuple(key), panel_keys + series_keys), g))
        ax.axhline(1.0, color="black", lw=1, alpha=0.7)
        ax.set_xscale("log")
        _style(ax, "decode batch (sequences, log scale)", "speedup (SD / no SD)",
               _label(tuple(pkey), panel_keys) if panel_keys else title)
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  title="faint: does not fit in memory; shaded: dips (S < 1)", title_fontsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    if panel_keys:
        fig.suptitle(title)
    table = pl.DataFrame(rows).with_columns(shown=pl.lit(True))
    if kept:  # the series left out of the figure: in the table, with their crossings, shown false
        order = panel_keys + [c for c in keys + extra if c not in panel_keys]  # as the shown rows are named
        hidden = full.join(df.select(order).unique(), on=order, how="anti")
        more = [dict(_series_row(_label(key, order), g), shown=False)
                for key, g in hidden.group_by(order, maintain_order=True)]
        table = pl.concat([table, pl.DataFrame(more, schema=table.schema)])
        fig.text(0.5, 0.0, f"{note}; every series is in the data table", ha="center", va="top", fontsize=8)
    return fig, table


def crossover_map_figure(df, x, y, title="Switch-off batch B_off"):
    """Heatmap of the switch-off batch B_off over two axes (log colour, contour lines), one panel per
    hardware/pair. Cells without a B_off are coloured by their curve status (helps throughout, never
    helps, helps with dips) so that the two meanings of "no crossover" never look alike."""
    keys = [c for c in ("hardware", "pair") if c in df.columns and df[c].n_unique() > 1]
    groups = list(df.group_by(keys, maintain_order=True)) if keys else [((), df)]
    ncols = min(len(groups), 2)
    nrows = -(-len(groups) // ncols)
    fig, axes = _subplots(nrows, ncols, figsize=(6.4 * ncols, 4.8 * nrows), squeeze=False)
    status = pl.col("status").cast(pl.String)
    finite_all = df.filter(pl.col("crossover_batch").is_finite())["crossover_batch"]
    lo = float(finite_all.min()) if finite_all.len() else 1.0
    hi = float(finite_all.max()) if finite_all.len() else 10.0
    norm = matplotlib.colors.LogNorm(vmin=max(lo, 1.0), vmax=max(hi, lo * 1.01, 2.0))
    out = []
    for ax, (gkey, gdf) in zip(axes.ravel(), groups):
        g = gdf.filter(pl.col("crossover_batch").is_finite()).group_by(x, y).agg(pl.col("crossover_batch").median())
        st = gdf.group_by(x, y).agg(status.mode().first().alias("status"))
        xs, ys = np.sort(gdf[x].unique().to_numpy()), np.sort(gdf[y].unique().to_numpy())
        xi, yi = {v: i for i, v in enumerate(xs)}, {v: i for i, v in enumerate(ys)}
        grid = np.full((len(ys), len(xs)), np.nan)
        for a, b, c in g.iter_rows():
            grid[yi[b], xi[a]] = c
        for a, b, name in st.iter_rows():
            if not np.isfinite(grid[yi[b], xi[a]]) and name in STATUS_COLOURS:
                ax.add_patch(matplotlib.patches.Rectangle((xi[a] - 0.5, yi[b] - 0.5), 1, 1,
                                                          color=STATUS_COLOURS[name], lw=0))
        mesh = ax.pcolormesh(np.arange(len(xs) + 1) - 0.5, np.arange(len(ys) + 1) - 0.5,
                             np.ma.masked_invalid(grid), cmap="cividis", norm=norm)
        finite = np.isfinite(grid)
        if finite.sum() >= 4 and len(xs) > 1 and len(ys) > 1:
            levels = [v for v in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384) if lo < v < hi]
            if levels:
                cs = ax.contour(np.arange(len(xs)), np.arange(len(ys)), np.log2(np.where(finite, grid, np.nan)),
                                levels=np.log2(levels), colors="white", linewidths=0.8)
                ax.clabel(cs, fmt=lambda v: f"{2 ** v:,.0f}", fontsize=7)
        ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs], fontsize=8, rotation=45 if len(xs) > 8 else 0)
        ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys], fontsize=8)
        ax.set_xlim(-0.5, len(xs) - 0.5)
        ax.set_ylim(-0.5, len(ys) - 0.5)
        fig.colorbar(mesh, ax=ax, label="B_off (sequences, log)")
        _style(ax, x, y, _label(tuple(gkey), keys) if keys else title)
        ax.grid(False)
        out.append(g.with_columns(*(pl.lit(v).alias(k) for k, v in zip(keys, gkey))))
    for ax in axes.ravel()[len(groups):]:
        ax.set_visible(False)
    handles = [matplotlib.patches.Patch(color=c, label=n.replace("_", " ")) for n, c in STATUS_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False,
               title="cells without a switch-off batch", title_fontsize=8, bbox_to_anchor=(0.5, -0.06))
    if keys:
        fig.suptitle(title)
    return fig, pl.concat(out, how="diagonal").sort(keys + [x, y])


def switch_off_by_pair_figure(df, bars="k_tokens", bound=None, order=None,
                              title="Switch-off batch B_off per configuration"):
    """Grouped bars of B_off per pair (e.g. one parallel layout each), one bar per value of `bars`, one panel
    per hardware and per pair prefix (the label before the first "."). A curve that helps throughout is
    a hatched bar up to the search bound `bound` (it stops paying beyond it, if at all), one that never
    helps an empty slot marked "never"; the memory-feasible batch with the drafter is a black tick.
    `df`: a crossover sweep with one row per (hardware, pair, `bars`); median over other axes. `order`:
    pair labels in the order to draw them (e.g. the spec's), default first seen."""
    status = pl.col("status").cast(pl.String)
    df = df.with_columns(pl.col("pair").str.split(".").list.first().alias("_group"),
                         pl.col("pair").str.split(".").list.slice(1).list.join(".").alias("_layout"))
    keys = [c for c in ("hardware", "_group") if df[c].n_unique() > 1] or ["_group"]
    groups = list(df.group_by(keys, maintain_order=True))
    ncols = min(len(groups), 2)
    nrows = -(-len(groups) // ncols)
    fig, axes = _subplots(nrows, ncols, figsize=(6.8 * ncols, 4.6 * nrows), squeeze=False)
    fig.subplots_adjust(hspace=0.6)
    values = sorted(df[bars].unique().to_list())
    width = 0.8 / len(values)
    out = []
    top = bound or float(df["crossover_batch"].max() or 1.0) * 2
    for ax, (gkey, gdf) in zip(axes.ravel(), groups):
        agg = gdf.group_by("_layout", bars, maintain_order=True).agg(
            pl.col("crossover_batch").median(), status.mode().first().alias("status"),
            pl.col("max_batch_sd").median())
        layouts = list(dict.fromkeys(agg["_layout"].to_list()))
        if order:
            rank = {p.split(".", 1)[-1]: i for i, p in enumerate(order)}
            layouts.sort(key=lambda lay: rank.get(lay, len(rank)))
        for j, v in enumerate(values):
            sub = agg.filter(pl.col(bars) == v)
            pos = {lay: i for i, lay in enumerate(layouts)}
            for lay, b, st in sub.select("_layout", "crossover_batch", "status").iter_rows():
                x = pos[lay] - 0.4 + width * (j + 0.5)
                if st == Curve.HELPS_THROUGHOUT.label:
                    ax.bar(x, top, width, color="none", edgecolor=OKABE_ITO[j % 8], hatch="///", lw=0.8)
                elif b is not None and np.isfinite(b):
                    ax.bar(x, b, width, color=OKABE_ITO[j % 8])
                else:
                    ax.text(x, 1.2, "never", rotation=90, fontsize=6, ha="center", va="bottom")
            ax.bar(0, 0, 0, color=OKABE_ITO[j % 8], label=f"{LABELS.get(bars, bars)} = {v:g}")
        for i, lay in enumerate(layouts):
            mb = agg.filter(pl.col("_layout") == lay)["max_batch_sd"].median()
            if mb is not None and mb >= 1:
                ax.plot([i - 0.42, i + 0.42], [mb, mb], color="black", lw=1.6)
        ax.set_yscale("log")
        ax.set_ylim(1, top * 1.5)
        ax.set_xticks(range(len(layouts)), layouts, fontsize=8, rotation=30, ha="right")
        label = " / ".join(str(v) for v in (gkey if isinstance(gkey, tuple) else (gkey,)))
        _style(ax, "", "B_off (sequences, log)", label)
        out.append(agg.with_columns(*(pl.lit(v).alias(k.lstrip("_")) for k, v in zip(keys, gkey))))
    for ax in axes.ravel()[len(groups):]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    handles += [matplotlib.patches.Patch(facecolor="none", edgecolor="grey", hatch="///"),
                matplotlib.lines.Line2D([], [], color="black", lw=1.6)]
    labels += ["helps up to the search bound", "memory-feasible batch (with the drafter)"]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, -0.04))
    fig.suptitle(title)
    return fig, pl.concat(out, how="diagonal").rename({"_layout": "layout"})


def sensitivity_figure(results, top=12, title="What moves the switch-off batch B_off", of="B_off"):
    """Ranked elasticity bars, one colour per scenario. `results` maps label -> {input: elasticity}
    (all of B_off, or all of the speedup: `of`)."""
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
    _style(ax, f"elasticity of {of} (% change of {of} per % change of input)", "input", title)
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
                ax.scatter(sub["intensity"], sub["achieved_flops_per_s"], marker=markers[kind], s=SIZES[i % len(SIZES)],
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


def measured_at_load_figure(panels, title="Measured vs predicted speedup over client concurrency"):
    """Speedup vs closed-loop client concurrency (log2 axis), one colour per series: the measured rows
    (filled circles, solid line) and each prediction (`panels`: name -> validate per-row table of the
    same rows; hollow markers, one line style per prediction). Returns the rows drawn."""
    if isinstance(panels, pl.DataFrame):
        panels = {"predicted": panels}
    fig, ax = _subplots(figsize=(7.4, 4.8))
    first = next(iter(panels.values()))
    series = sorted(first["series"].unique())
    frames = []
    for i, s in enumerate(series):
        colour = OKABE_ITO[i % 8]
        g = first.filter(pl.col("series") == s).sort("concurrency")
        ax.plot(g["concurrency"], g["measured_speedup"], "o-", color=colour, lw=1.6, label=f"{s}: measured")
        for j, (name, df) in enumerate(panels.items()):
            h = df.filter(pl.col("series") == s).sort("concurrency")
            ax.plot(h["concurrency"], h["predicted_speedup"], marker="s", mfc="none", color=colour,
                    ls=LINESTYLES[(j + 1) % 4], lw=1.0, label=f"{s}: {name}")
            frames.append(h.select("series", "concurrency", "measured_speedup", "predicted_speedup")
                          .with_columns(pl.lit(name).alias("prediction")))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.axhline(1, color="grey", lw=0.6)
    ax.set_ylim(bottom=0)
    _style(ax, "client concurrency (closed loop, requests)", "speedup (throughput ratio, SD / plain)", title)
    ax.legend(fontsize=7, frameon=False, loc="lower left")
    return fig, pl.concat(frames)


def from_sweep(out):
    """Collect a sweep directory for plotting."""
    return io.read_results(out).collect()


def _one_baseline(df, x):
    """True where every series has the same baseline TPOT over `x` (they differ only in the drafter): the
    baseline is then drawn once, in black."""
    bases = [tuple(np.round(g.sort(x)["tpot_base_s"].to_numpy(), 12)) for _, g in
             df.group_by("label", maintain_order=True)]
    return len(bases) > 1 and len(set(bases)) == 1


def serving_figure(df, marks, title="Serving load: TPOT and batch vs request rate"):
    """TPOT (top) and running batch (bottom) vs request rate, without (dashed) and with (solid)
    speculation, one colour per scenario (`df`, `marks` from `curves.serving_grid`); the switch-off rate
    is a dotted vertical line, each side's sustainable rate a tick on the rate axis (dashed: without
    speculation); rates a side cannot sustain are left out (its queue grows), and a scenario without rows
    (one request does not fit) is a row of the table with its status, not a line."""
    fig, (top, bottom) = _subplots(2, 1, figsize=(8.4, 7.0), sharex=True, layout="constrained")
    rows = []
    shared = _one_baseline(df, "qps")
    for j, (label, g) in enumerate(df.group_by("label", maintain_order=True)):
        label = label[0] if isinstance(label, tuple) else label
        color, m = OKABE_ITO[j % len(OKABE_ITO)], marks[label]
        q = g["qps"].to_numpy()
        status = g["status"].to_numpy()
        ok_base, ok_sd = (np.isin(status, [s.label for s in Serving if s.sustains(sd)]) for sd in (False, True))
        off = m["switch_off_qps"]
        tag = f"switch-off {off:.3g} req/s" if off else Curve.of(m["curve_status"]).text("tag")
        for ax, base, sd, scale in ((top, "tpot_base_s", "tpot_sd_s", 1e3), (bottom, "batch_base", "batch_sd", 1.0)):
            if not shared or j == 0:
                ax.plot(q, np.where(ok_base, g[base].to_numpy() * scale, np.nan), color="black" if shared else color,
                        ls="--", lw=1.6, label=("no speculation" if shared else f"{label}: no speculation")
                        if ax is top else None)
            ax.plot(q, np.where(ok_sd, g[sd].to_numpy() * scale, np.nan), color=color, ls="-", lw=2.2,
                    label=f"{label}: speculation ({tag})" if ax is top else None)
            if off:
                ax.axvline(off, color=color, ls=":", lw=1.2)
        for key, ls in (("max_qps_base", (0, (2, 1))), ("max_qps_sd", "-")):  # sustainable rates: ticks on the axis
            if m[key] and (key == "max_qps_sd" or not shared or j == 0):
                bottom.axvline(m[key], ymin=0, ymax=0.07, color="black" if shared and key == "max_qps_base" else color,
                               lw=3, ls=ls)
        rows.append(dict(series=label, switch_off_qps=off, max_qps_base=m["max_qps_base"],
                         max_qps_sd=m["max_qps_sd"], points=len(q), curve_status=m["curve_status"]))
    return _finish_load_figure(fig, top, bottom, rows, marks, "qps", title, "request rate (requests/s, log scale)",
                               "running batch (sequences, log)",
                               "dotted: switch-off rate; ticks at the bottom: sustainable rates")


def _finish_load_figure(fig, top, bottom, rows, marks, load, title, xlabel, bottom_label, legend):
    """The shared end of `serving_figure` and `concurrency_figure`: a table row (no points) for every scenario
    that drew none, log axes with plain numbers, labels and the legend; returns (fig, table)."""
    drawn = {r["series"] for r in rows}
    rows += [dict(series=label, **{f"switch_off_{load}": None}, **{f"max_{load}_{s}": m[f"max_{load}_{s}"]
                                                                 for s in ("base", "sd")},
                  points=0, curve_status=m["curve_status"]) for label, m in marks.items() if label not in drawn]
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    top.set_xscale("log")
    for ax in (top, bottom):
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    bottom.xaxis.set_major_formatter(plain)
    _style(top, "", "TPOT (ms per output token, log)", title)
    _style(bottom, xlabel, bottom_label)
    top.legend(fontsize=7, frameon=False, loc="upper left", title=legend, title_fontsize=7)
    return fig, pl.DataFrame(rows)


def concurrency_figure(df, marks, title="Closed loop: TPOT and output throughput vs client concurrency"):
    """TPOT (top) and output throughput (bottom) vs client concurrency N (docs/model.md §11, `vllm bench
    serve --max-concurrency N`), without (dashed) and with (solid) speculation, one colour per scenario
    (`df`, `marks` from `curves.concurrency_grid`); the switch-off concurrency is a dotted vertical line, each
    side's batch cap (beyond it clients queue for a slot: the curves go flat, the wait goes into TTFT) a tick
    on the N axis (dashed: without speculation), and the queued part of a curve is drawn thin."""
    fig, (top, bottom) = _subplots(2, 1, figsize=(8.4, 7.0), sharex=True, layout="constrained")
    rows = []
    shared = _one_baseline(df, "concurrency")
    for j, (label, g) in enumerate(df.group_by("label", maintain_order=True)):
        label = label[0] if isinstance(label, tuple) else label
        color, m = OKABE_ITO[j % len(OKABE_ITO)], marks[label]
        g = g.sort("concurrency")
        n = g["concurrency"].to_numpy()
        off = m["switch_off_concurrency"]
        tag = f"switch-off {off:.3g} clients" if off else Curve.of(m["curve_status"]).text("tag").replace(
            "sustainable rate", "concurrency")
        for ax, base, sd, scale in ((top, "tpot_base_s", "tpot_sd_s", 1e3),
                                    (bottom, "throughput_base_tok_s", "throughput_sd_tok_s", 1.0)):
            for col, side, ls, lw, c, name in ((base, "status_base", "--", 1.6, "black" if shared else color,
                                                "no speculation" if shared else f"{label}: no speculation"),
                                               (sd, "status_sd", "-", 2.2, color, f"{label}: speculation ({tag})")):
                if col == base and shared and j > 0:
                    continue
                y = g[col].to_numpy() * scale
                queued = g[side].to_numpy() == "queued"
                admitted = np.where(~queued | np.roll(~queued, 1), y, np.nan)  # joined to the first queued point
                ax.plot(n, admitted, color=c, ls=ls, lw=lw, label=name if ax is top else None)
                ax.plot(n, np.where(queued, y, np.nan), color=c, ls=ls, lw=0.8)
            if off:
                ax.axvline(off, color=color, ls=":", lw=1.2)
        for key, ls in (("max_concurrency_base", (0, (2, 1))), ("max_concurrency_sd", "-")):
            if m[key] and (key == "max_concurrency_sd" or not shared or j == 0):
                bottom.axvline(m[key], ymin=0, ymax=0.07, lw=3, ls=ls,
                               color="black" if shared and key == "max_concurrency_base" else color)
        rows.append(dict(series=label, switch_off_concurrency=off, max_concurrency_base=m["max_concurrency_base"],
                         max_concurrency_sd=m["max_concurrency_sd"], points=len(n), curve_status=m["curve_status"]))
    return _finish_load_figure(fig, top, bottom, rows, marks, "concurrency", title,
                               "client concurrency N (requests in flight, log scale)",
                               "output throughput (tokens/s, log)",
                               "dotted: switch-off concurrency; ticks at the bottom: batch caps (thin: clients queue)")
