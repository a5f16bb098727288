"""Fit the shipped engine profiles (specjax/presets/engines/*.toml) on the public measurements.

    python tools/fit_engines.py            # rewrites generic.toml, vllm.toml, sglang.toml, trtllm.toml

As `specjax validate --leave-one-source-out` does per fold (`engine/transfer.fit_profiles`): a pooled
profile is calibrated on every row of data/measured/*.csv first, then each engine's profile on the
rows whose engine column names it, starting from the pooled values and holding at them the terms its
own rows do not identify. Every series is used (no held-out split: the held-out numbers are the
leave-one-source-out ones in the README). The file lists what was identified and what was held.
The pooled profile's efficiencies, without its overheads, ship as `generic`: it serves measurement rows
of engines with no profile of their own.
"""

import dataclasses
import pathlib
import sys

ROOT = pathlib.Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from specjax import catalogue  # noqa: E402
from specjax.engine import calibrate, validate  # noqa: E402
from specjax.inputs import engines  # noqa: E402
from specjax.inputs import measured  # noqa: E402
from specjax.outputs import io  # noqa: E402

DATA = [ROOT / "data" / "measured" / f for f in ("public.csv", "step_times.csv", "trees.csv")]
OUT = ROOT / "specjax" / "presets" / "engines"
GENERIC = ("Efficiencies pooled over every engine in the public data (vLLM, SGLang, TensorRT-LLM, T5X), no overheads "
           "(they do not transfer between engines): for engines without a profile")
ENGINES = {"vllm": "vLLM (V1, CUDA graphs), fitted on SpecDecode-Bench's vLLM rows and vLLM issue 20780's step times",
           "sglang": "SGLang (0.5.9), fitted on SpecDecode-Bench's SGLang chain and tree rows (speedups only)",
           "trtllm": "TensorRT-LLM, fitted on the DeepSeek-R1 MTP step times of its B200 tech blog 1"}


def _transferable(cal):
    """The pooled calibration as `generic` ships it: its efficiencies, no overheads (`engines.transferable`)."""
    profile = engines.transferable(cal.profile)
    return dataclasses.replace(cal, profile=profile, values=profile.values, identified=profile.fitted,
                               held=tuple(n for n in cal.held if n not in catalogue.OVERHEADS))


def main():
    rows = [r for path in DATA for r in measured.load(path) if not r.unsupported]
    pooled = calibrate.fit(rows, name="pooled", holdout_fraction=0.0, steps=1500, progress=calibrate.print_progress)
    print("pooled: " + ", ".join(f"{k}={v:.4g}" for k, v in pooled.values.items()))
    for engine, description in {"generic": GENERIC, **ENGINES}.items():
        sub = rows if engine == "generic" else [r for r in rows if r.engine_name == engine]
        cal = _transferable(pooled) if engine == "generic" else calibrate.fit(
            sub, name=engine, holdout_fraction=0.0, steps=1500, progress=calibrate.print_progress, prior=pooled.values)
        _, s = validate.evaluate(sub, cal.profile)
        _, s0 = validate.evaluate(sub, "roofline")
        stats = dict(data=", ".join(str(p.relative_to(ROOT)) for p in DATA), rows=cal.rows,
                     series=len(cal.train_series), condition=cal.condition, fit_median_ape=s["median_ape"],
                     fit_p90_ape=s["p90_ape"], roofline_median_ape=s0["median_ape"])
        cal = calibrate.Calibration(**{**cal.__dict__, "profile": cal.profile.__class__(
            **{**cal.profile.__dict__, "description": description, "name": engine})})
        io.write_bytes_atomic(OUT / f"{engine}.toml", calibrate.profile_toml(cal, stats).encode())
        print(f"{engine}: identified {', '.join(cal.identified) or 'none'}; "
              + ", ".join(f"{k}={v:.4g}" for k, v in cal.values.items())
              + f"; fit median APE {s['median_ape']:.1%} (pure roofline {s0['median_ape']:.1%})")


if __name__ == "__main__":
    main()
