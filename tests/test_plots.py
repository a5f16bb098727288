"""Every plot kind rendered from a tiny sweep or model flags: valid PNG/SVG of sensible size, and
the data behind each figure matches the grid. The HTML report opens in headless Chromium."""

import os
import pathlib
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import polars as pl
import pytest

from specjax.outputs import io, plots
from specjax.inputs import spec
from specjax.engine import sweep
from specjax.cli import main

ROOT = pathlib.Path(__file__).parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_files(base):
    png, svg = pathlib.Path(f"{base}.png"), pathlib.Path(f"{base}.svg")
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and 10_000 < len(data) < 2_000_000
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert 500 < w < 3000 and 400 < h < 3000
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg") and len(svg.read_text()) > 5_000


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed")
    sweep.run(spec.load(ROOT / "sweeps" / "seed.toml"), out)
    return out


def run(args):
    with pytest.raises(SystemExit) as e:
        main(args)
    return e.value.code


def test_speedup_plot_data_matches_grid(seed_dir, tmp_path):
    df = io.read_results(seed_dir).collect()
    fig, data = plots.speedup_figure(df)
    plots.save(fig, tmp_path / "s")
    check_files(tmp_path / "s")
    llama = data.filter(pl.col("series").str.contains("llama"))
    grid = df.filter(pl.col("pair") == "llama-3-70b+ratio").sort("batch_seqs")
    assert llama["max_speedup"][0] == pytest.approx(grid["speedup"].max())
    assert llama["crossover_batch"][0] == pytest.approx(222.35, rel=0.01)  # interpolated on the 241-point grid
    assert llama["first_infeasible_batch"][0] == 1.0  # does not fit at all
    oss = data.filter(pl.col("series").str.contains("gpt-oss"))
    assert 1400 < oss["first_infeasible_batch"][0] < 1600
    assert run(["plot", "speedup", "--from", str(seed_dir), "--out", str(tmp_path / "cli")]) == 0
    check_files(tmp_path / "cli")


def test_crossover_map(tmp_path):
    text = (ROOT / "sweeps" / "dense_vs_moe.toml").read_text().replace('"qwen3-30b-a3b"', '"gpt-oss-20b"')
    s = spec.from_text(text.replace("[8, 16, 32, 64, 128, 256, 512, 1024]", "[16, 64, 256]"), "x.toml")
    sweep.run(s, tmp_path / "d")
    df = io.read_results(tmp_path / "d").collect().filter(pl.col("pair").str.starts_with("gpt-oss-120b"))
    fig, data = plots.crossover_map_figure(df, "n_experts", "top_k")
    plots.save(fig, tmp_path / "m")
    check_files(tmp_path / "m")
    want = df.filter(pl.col("crossover_batch").is_finite()).group_by("n_experts", "top_k").agg(
        pl.col("crossover_batch").median()).sort("n_experts", "top_k")
    assert data.equals(want) and data.height > 0
    assert run(["plot", "crossover-map", "--from", str(tmp_path / "d"), "--x", "n_experts", "--y", "alpha",
                "--out", str(tmp_path / "cli")]) == 0
    check_files(tmp_path / "cli")


def test_sensitivity_roofline_optimal_k_validation_from_flags(tmp_path):
    flags = ["--hardware", "h200", "--draft-cost", "0.145", "--kv-dtype", "fp8", "--roofline", "pass"]
    assert run(["plot", "sensitivity", "--target", "llama-3-70b", "--target", "gpt-oss-120b", *flags,
                "--alpha", "0.814", "--out", str(tmp_path / "sens")]) == 0
    check_files(tmp_path / "sens")
    from specjax import api
    from specjax.inputs import seed

    res = {s: api.sensitivity(sc)["elasticities"] for s, sc in seed.scenarios().items()}
    _, data = plots.sensitivity_figure(res)
    row = data.filter((pl.col("scenario") == "gpt-oss-120b") & (pl.col("input") == "alpha"))
    assert row["elasticity"][0] == pytest.approx(res["gpt-oss-120b"]["alpha"])
    assert run(["plot", "roofline", "--target", "gpt-oss-120b", *flags, "--batch", "1", "--batch", "512",
                "--out", str(tmp_path / "roof")]) == 0
    check_files(tmp_path / "roof")
    from specjax.inputs.scenario import Scenario

    sc = Scenario(engine="roofline",
                  target="gpt-oss-120b", hardware="h200", draft_cost=0.145, alpha=0.8, kv_dtype="fp8")
    hw, dep, tgt, _, _ = sc.build()
    from specjax.outputs import curves

    _, roof = plots.roofline_figure(curves.roofline_points(hw, dep, tgt, [1, 512], 2.0, 2048.0), 1e15, 4.8e12,
                                    [1, 512], 2.0)
    dense = roof.filter((pl.col("operator") == "dense weights") & (pl.col("pass_kind") == "decode"))
    # dense weights at batch 1: 2 FLOP per param per token over 2 bytes per param (bf16) = intensity 1
    assert dense.filter(pl.col("batch") == 1)["intensity"][0] == pytest.approx(1.0, rel=1e-5)
    assert dense.filter(pl.col("batch") == 512)["intensity"][0] == pytest.approx(512.0, rel=1e-5)
    assert run(["plot", "optimal-k", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle",
                "--draft", "eagle3-llama-3.1-8b", "--alpha", "0.6", "--alpha", "0.9",
                "--out", str(tmp_path / "k")]) == 0
    check_files(tmp_path / "k")
    assert run(["plot", "validation", "--from", str(ROOT / "data" / "measured" / "public.csv"),
                "--out", str(tmp_path / "v")]) == 0
    check_files(tmp_path / "v")


def test_speedup_plot_series_alphas_facets_and_b_off(tmp_path):
    """Every --alpha is a series; more than 8 series are faceted per pair with a legend outside; each
    series' B_off is the last crossing of its curve (the MoE dip is shaded, not taken for B_off)."""
    from specjax.inputs.scenario import Scenario
    from specjax.outputs import curves

    scs = {f"{t} | alpha={a:g}": Scenario(target=t, hardware="h200", drafter="ratio", draft_cost=0.145, alpha=a,
                                          kv_dtype="fp8", engine="roofline", roofline="pass")
           for t in ("llama-3.1-8b", "gpt-oss-120b") for a in (0.5, 0.6, 0.7, 0.8, 0.9)}
    grid = curves.speedup_grid(scs, np.geomspace(1, 65536, 400))
    grid = grid.with_columns(pl.col("pair").str.split(" | ").list.get(0).alias("pair"),
                             pl.col("pair").str.split("=").list.get(1).cast(pl.Float64).alias("alpha"))
    fig, data = plots.speedup_figure(grid)
    assert data.height == 10 and len([a for a in fig.axes if a.get_visible()]) == 2  # 10 series: one panel per pair
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None and len(legend.get_texts()) == 5
        assert all("alpha=" in t.get_text() for t in legend.get_texts())
        assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # outside the axes
    plots.save(fig, tmp_path / "f")
    check_files(tmp_path / "f")
    from specjax import api

    for a in (0.5, 0.9):
        want = api.crossover(scs[f"gpt-oss-120b | alpha={a:g}"])["crossover_batch"]
        got = data.filter(pl.col("series") == f"gpt-oss-120b, alpha={a:g}")["crossover_batch"][0]
        assert got == pytest.approx(want, rel=0.01)
    assert run(["plot", "speedup", "--target", "gpt-oss-120b", "--hardware", "h200", "--draft-cost", "0.145",
                "--alpha", "0.6", "--alpha", "0.8", "--out", str(tmp_path / "two")]) == 0
    check_files(tmp_path / "two")


def test_plots_refuse_empty_or_missing_inputs(tmp_path, capsys):
    flags = ["--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram"]
    assert run(["plot", "speedup", *flags, "--out", str(tmp_path / "a")]) == 2
    assert "needs --alpha" in capsys.readouterr().err and not (tmp_path / "a.png").exists()
    # no switch-off batch (never helps at alpha 0): the speedup's elasticities, and the title says so
    assert run(["plot", "sensitivity", *flags, "--alpha", "0", "--out", str(tmp_path / "b")]) == 0
    check_files(tmp_path / "b")
    assert "speedup at batch 1" in (tmp_path / "b.svg").read_text()
    assert run(["plot", "sensitivity", *flags, "--context", "128", "--alpha", "0.7", "--alpha", "0",
                "--out", str(tmp_path / "c")]) == 2  # one curve has a B_off, the other none
    assert "plot them separately" in capsys.readouterr().err and not (tmp_path / "c.png").exists()
    # roofline needs no drafter cost and no acceptance
    assert run(["plot", "roofline", "--target", "llama-3.1-8b", "--hardware", "h100-sxm",
                "--out", str(tmp_path / "r")]) == 0
    check_files(tmp_path / "r")


def test_plot_bad_input(tmp_path, capsys):
    assert run(["plot", "pie", "--out", str(tmp_path / "x")]) == 2
    assert "kind='pie'" in capsys.readouterr().err
    assert run(["plot", "speedup", "--from", str(tmp_path / "nope")]) == 2
    assert "not a sweep output directory" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)")
def test_report_opens_in_headless_chromium(tmp_path):
    assert CHROMIUM, "CI must have Debian's chromium (.ci/run installs it)"
    out = tmp_path / "report"
    assert run(["report", str(ROOT / "sweeps" / "seed.toml"), "--out", str(out)]) == 0
    page = out / "index.html"
    text = page.read_text()
    # offline: no scripts, stylesheets or images fetched from anywhere
    assert "<script" not in text and "<link" not in text and 'src="http' not in text and "<img" not in text
    assert text.count("<svg") >= 2 and "Key numbers" in text and "Assumptions" in text
    shot = tmp_path / "shot.png"
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                        "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists(), r.stderr[-2000:]
    console_errors = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln and ("ERROR" in ln or "Uncaught" in ln)]
    assert not console_errors, console_errors
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    gray = img[..., :3].mean(axis=2)
    assert gray.std() > 0.05 and (gray < 0.5).mean() > 0.005  # not blank: text and lines drawn
    assert np.isfinite(gray).all()


def test_optimal_k_and_validation_data_match_their_sources(tmp_path):
    from specjax import api
    from specjax.inputs import measured
    from specjax.engine import validate
    from specjax.inputs.scenario import Scenario

    sc = Scenario(engine="roofline",
                  target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", alpha=0.7)
    from specjax.outputs import curves

    # the batches of `plot optimal-k` (49 from 1 to 4096, 1, 64 and 512 among them) at the two alphas of the
    # command in test_sensitivity_roofline_optimal_k_validation_from_flags: the kernel compiled there (same tree
    # structure, the engine's terms are leaves), not a compile for another grid shape
    grid = curves.optimal_k_grid(sc, [0.6, 0.9], np.geomspace(1, 4096, 49))
    fig, data = plots.optimal_k_figure(grid)
    plots.save(fig, tmp_path / "k")
    check_files(tmp_path / "k")
    want = api.optimize(__import__("dataclasses").replace(sc, alpha=0.9), [1.0, 64.0, 512.0])["k_star_by_batch"]
    got = data.filter((pl.col("alpha") == pl.lit(0.9, pl.Float32))
                      & pl.col("batch").is_in([1.0, 64.0, 512.0])).sort("batch")
    assert got["batch"].to_list() == [1.0, 64.0, 512.0]
    assert got["k_star"].to_list() == [r["k_star"] for r in want]
    rows = measured.load(ROOT / "data" / "measured" / "public.csv")[:40]
    table, _ = validate.evaluate(rows)
    fig, data = plots.validation_figure({"a": table, "b": table})
    plots.save(fig, tmp_path / "v")
    check_files(tmp_path / "v")
    assert data.height == 80 and data.filter(pl.col("panel") == "a")["predicted_speedup"].to_list() == \
        table["predicted_speedup"].to_list()


def test_switch_off_by_pair_figure_draws_the_grid():
    import polars as pl
    from specjax.outputs import plots
    df = pl.DataFrame(dict(
        hardware=["h200"] * 6, pair=["m.tp8", "m.tp8", "m.dp8-ep8", "m.dp8-ep8", "m.tp16", "m.tp16"],
        k_tokens=[1.0, 2.0] * 3, crossover_batch=[None, None, 5000.0, 2800.0, 1200.0, 800.0],
        status=["helps_throughout", "helps_throughout", "stops_paying", "stops_paying", "stops_paying",
                "stops_paying"], max_batch_sd=[142.0, 141.0, 858.0, 858.0, 287.0, 287.0]))
    fig, data = plots.switch_off_by_pair_figure(df, bound=16384, order=["m.tp8", "m.dp8-ep8", "m.tp16"])
    assert data.filter((pl.col("layout") == "dp8-ep8") & (pl.col("k_tokens") == 2.0))["crossover_batch"][0] == 2800
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tp8", "dp8-ep8", "tp16"]
    heights = sorted(round(p.get_height()) for p in ax.patches if p.get_height() > 0)
    assert heights == [800, 1200, 2800, 5000, 16384, 16384]  # two hatched bars to the search bound


def test_figure_kernels_compile_once():
    """The figure frames call module-level jitted kernels: a second figure of the same shapes (other
    scenarios, other batches) compiles nothing."""
    from specjax.engine import curve_kernels
    from specjax.inputs.scenario import Scenario
    from specjax.outputs import curves

    scs = {f"alpha={a}": Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="ratio", draft_cost=0.1,
                                  alpha=a) for a in (0.6, 0.8)}
    first = curves.speedup_grid(scs, [1.0, 8.0, 64.0])
    size = curve_kernels.speedup_over_batch._cache_size()
    again = curves.speedup_grid(scs, [2.0, 16.0, 128.0])
    assert curve_kernels.speedup_over_batch._cache_size() == size
    assert first.height == again.height == 6
