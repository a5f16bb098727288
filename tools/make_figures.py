"""Regenerate the README's figures (docs/*.png) from the shipped specs and data.

Run from the repository root: ``python tools/make_figures.py``. Every number in a figure comes
from specjax itself: the seed sweep, the sensitivity kernel and the validation/calibration of
data/measured/public.csv.
"""

import pathlib
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from specjax import api, calibrate, measured, plots, seed, spec, sweep, validate  # noqa: E402


def main():
    docs = ROOT / "docs"
    tmp = pathlib.Path(tempfile.mkdtemp())
    sweep.run(spec.load(ROOT / "sweeps" / "seed.toml"), tmp / "seed")
    fig, _ = plots.speedup_figure(plots.from_sweep(tmp / "seed"),
                                  title="Llama-3-70B vs gpt-oss-120b on an H200 (headline scenario)")
    plots.save(fig, docs / "headline")
    res = {s: api.sensitivity(sc)["elasticities"] for s, sc in seed.scenarios().items()}
    fig, _ = plots.sensitivity_figure(res, title="Elasticity of the crossover batch (headline scenario)")
    plots.save(fig, docs / "sensitivity")
    rows = [r for r in measured.load(ROOT / "data" / "measured" / "public.csv") if r.hardware == "h100-sxm"]
    cal = calibrate.fit(rows, fit_locality=True)
    held = [r for r in rows if r.series in set(cal.heldout_series)]
    before, s0 = validate.evaluate(held)
    after, s1 = validate.evaluate(held, cal.profiles)
    fig, _ = plots.validation_figure({
        f"held-out series, pure roofline (median APE {s0['median_ape']:.1%})": before,
        f"held-out series, calibrated (median APE {s1['median_ape']:.1%})": after})
    plots.save(fig, docs / "validation")
    shutil.rmtree(tmp)
    print(pl.DataFrame([dict(split="held-out before", **s0), dict(split="held-out after", **s1)]))


if __name__ == "__main__":
    main()
