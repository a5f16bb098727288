"""Fit the shipped engine profiles (specjax/presets/engines/*.toml) on the public measurements.

    python tools/fit_engines.py            # rewrites generic, vllm, sglang, trtllm and atom .toml

As `specjax validate --leave-one-source-out` does per fold (`engine/transfer.fit_profiles`): a pooled
profile is calibrated on every row of data/measured/*.csv first, then each engine's profile on the
rows whose engine column names it, starting from the pooled values and holding at them the terms its
own rows do not identify. Every series is used (no held-out split: the held-out numbers are the
leave-one-source-out ones in the README). The file lists what was identified and what was held.
The pooled profile's efficiencies and per-token terms, without its overheads, ship as `generic`: it serves
measurement rows of engines with no profile of their own. A preset's `[scheduler]` table (the engine's
own defaults, read from its source, not fitted) is kept as it is.
"""

import dataclasses
import pathlib
import sys

ROOT = pathlib.Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from specjax import catalogue  # noqa: E402
from specjax.engine import calibrate, transfer, validate  # noqa: E402
from specjax.inputs import engines  # noqa: E402
from specjax.inputs import measured  # noqa: E402
from specjax.outputs import io  # noqa: E402

DATA = [ROOT / "data" / "measured" / f for f in ("public.csv", "step_times.csv", "trees.csv", "serving_steps.csv")]
OUT = ROOT / "specjax" / "presets" / "engines"
GENERIC = ("Efficiencies and per-token terms pooled over every engine in the public data (vLLM, SGLang, TensorRT-LLM, "
           "ATOM, T5X), no overheads (they do not transfer between engines): for engines without a profile")
ENGINES = {"vllm": "vLLM (V1, CUDA graphs), fitted on SpecDecode-Bench's vLLM rows, vLLM issue 20780's step times and "
                   "plain step times under load (H100, MI300X)",
           "sglang": "SGLang (0.5), fitted on SpecDecode-Bench's SGLang chain and tree rows and plain step times under "
                     "load (H100, H200, two-node H100)",
           "trtllm": "TensorRT-LLM, fitted on the DeepSeek-R1 MTP step times of its B200 tech blog 1 and LLMPerf "
                     "step times of DeepSeek-R1 on H200 and B200",
           "atom": "ATOM (AMD's ROCm engine on AITER kernels), fitted on its MI355X plain step times under load "
                   "(nightly dashboard and Qwen3-235B recipe)"}


def _transferable(cal):
    """The pooled calibration as `generic` ships it: its efficiencies, no overheads (`engines.transferable`)."""
    profile = engines.transferable(cal.profile)
    return dataclasses.replace(cal, profile=profile, values=profile.values, identified=profile.fitted,
                               held=tuple(n for n in cal.held if n not in catalogue.OVERHEADS))


def _scheduler_tail(path):
    """The `[scheduler]` part of an existing preset (with the comment lines just above it), kept as it is."""
    if not path.exists():
        return ""
    lines = path.read_text().splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.strip() == "[scheduler]"), None)
    if at is None:
        return ""
    while at > 0 and lines[at - 1].startswith("#"):
        at -= 1
    return "\n" + "\n".join(lines[at:]) + "\n"


def _section_toml(hardware, cal):
    """A `[hardware.<slug>]` table of the terms that GPU's own rows identified, with their errors."""
    lines = ["", f"# {cal.rows} rows on {hardware} of their own: identified "
             + (", ".join(f"{n} ± {cal.std_errors[n]:.3g}" for n in cal.identified) or "nothing"),
             f"[hardware.{hardware}]"]
    return "\n".join(lines + [f"{n} = {calibrate._toml_value(float(cal.values[n]))}" for n in cal.identified]) + "\n"


def _describe(cal):
    return (f"identified {', '.join(cal.identified) or 'none'}; "
            + ", ".join(f"{k}={v:.4g}" + (f" ± {cal.std_errors[k]:.2g}" if k in cal.identified else "")
                        for k, v in cal.values.items()))


def main():
    rows = [r for path in DATA for r in measured.load(path) if not r.unsupported]
    common = [r for r, sec in zip(rows, transfer.in_sections(rows)) if not sec]
    pooled = calibrate.fit(common, name="pooled", holdout_fraction=0.0, steps=1500, progress=calibrate.print_progress)
    print("pooled: " + _describe(pooled))
    for engine, description in {"generic": GENERIC, **ENGINES}.items():
        sub = rows if engine == "generic" else [r for r in rows if r.engine_name == engine]
        if engine == "generic":
            cal, sections = _transferable(pooled), {}
        else:
            cal, sections = transfer.fit_engine(sub, engine, pooled.values, steps=1500,
                                                progress=calibrate.print_progress)
        profile = transfer.with_sections(cal.profile, sections)
        _, s = validate.evaluate(sub, profile)
        _, s0 = validate.evaluate(sub, "roofline")
        plain = s.get("plain_steps", {})
        stats = dict(data=", ".join(str(p.relative_to(ROOT)) for p in DATA), rows=cal.rows,
                     series=len(cal.train_series), condition=cal.condition, fit_median_ape=s["median_ape"],
                     fit_p90_ape=s["p90_ape"], roofline_median_ape=s0["median_ape"],
                     plain_steps_median_ape=plain.get("median_ape"))
        cal = calibrate.Calibration(**{**cal.__dict__, "profile": cal.profile.__class__(
            **{**cal.profile.__dict__, "description": description, "name": engine})})
        out = OUT / f"{engine}.toml"
        text = calibrate.profile_toml(cal, stats) + "".join(_section_toml(h, c) for h, c in sections.items())
        io.write_bytes_atomic(out, (text + _scheduler_tail(out)).encode())
        pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731  (a file of plain times has no speedups)
        print(f"{engine}: {_describe(cal)}; fit median APE {pct(s['median_ape'])} (pure roofline "
              f"{pct(s0['median_ape'])}); plain steps {pct(plain.get('median_ape'))} (pure roofline "
              f"{pct(s0.get('plain_steps', {}).get('median_ape'))})")
        for h, c in sections.items():
            print(f"  {engine} on {h} ({c.rows} rows): {_describe(c)}")


if __name__ == "__main__":
    main()
