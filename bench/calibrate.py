"""Calibration speed: `specjax calibrate` on the shipped measurements (data/measured/public.csv and
step_times.csv), end to end (load, stack, optax fit with the identifiability analysis) and the fit
alone: optimizer steps/s and model evaluations/s (rows x steps), against one evaluation of every row
by the NumPy reference, which has no gradient (the ratio says what a NumPy fit without autodiff
would pay per step before it even differentiated).

Usage: python bench/calibrate.py [--steps N]
The last line printed is one JSON object.
"""

import argparse
import json
import time

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import numpy as np  # noqa: E402

import numpy_reference as npref  # noqa: E402
import reference as ref  # noqa: E402
from specjax.engine import calibrate  # noqa: E402
from specjax.inputs import measured  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for f in ("public.csv", "step_times.csv") for r in measured.load(ROOT / "data" / "measured" / f)]
    ok = [r for r in rows if not r.unsupported and r.load_kind == "batch"]
    t_load = time.perf_counter() - t0
    t1 = time.perf_counter()
    cal = calibrate.fit(ok, steps=args.steps)
    t_fit = time.perf_counter() - t1
    # the NumPy reference evaluating every row once (pure roofline, per configuration, vectorised over its rows)
    hw, deploy, tgt, dr, dec = measured.stack(ok, "roofline")
    t2 = time.perf_counter()
    n = len(ok)
    for i in range(n):
        h = ref.as_floats(type(hw)(**{f: getattr(hw, f)[i] for f in hw.field_names}))
        t = ref.as_floats(type(tgt)(**{f: getattr(tgt, f)[i] for f in tgt.field_names}))
        d = ref.as_floats(type(dr)(**{f: getattr(dr, f)[i] for f in dr.field_names}))
        npref.speedup(h, t, d, *(np.asarray([float(getattr(dec, c)[i])]) for c in ("batch", "k", "alpha", "context")),
                      lay=dict(tp=float(deploy.tp[i]), ep=float(deploy.ep[i]), dp=float(deploy.dp_attention[i])))
    t_np = time.perf_counter() - t2
    evals = cal.rows * args.steps
    print(f"calibrate: {len(rows)} rows read ({len(ok)} usable) in {t_load:.2f} s; fit on {cal.rows} rows, "
          f"{args.steps} optax steps in {t_fit:.1f} s ({args.steps / t_fit:,.0f} steps/s, {evals / t_fit:,.0f} "
          f"row evaluations with gradients/s)")
    print(f"NumPy reference, forward only, one pass over the rows: {n / t_np:,.0f} rows/s; "
          f"JAX fit (forward + gradient) / NumPy forward = {evals / t_fit / (n / t_np):,.0f}x")
    print(json.dumps(dict(rows=len(rows), usable=len(ok), fit_rows=cal.rows, steps=args.steps, load_s=t_load,
                          fit_s=t_fit, steps_per_s=args.steps / t_fit, row_evals_per_s=evals / t_fit,
                          numpy_rows_per_s=n / t_np, identified=list(cal.identified))))


if __name__ == "__main__":
    main()
