"""Validation against measurements and calibration: hand-computed errors, recovery of known
efficiencies from synthetic data, malformed CSVs, and the CLI."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from specjax.engine import calibrate, validate
from specjax.inputs import hardware, measured
from specjax.cli import main
from specjax.errors import SpecError

HEADER = ("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,weight_dtype,"
          "measured_speedup,metric,approximate,source_url")


def ref_speedup(target, hw_slug, batch, k, alpha, ctx, draft=None):
    from specjax.inputs import models

    hw = ref.as_floats(hardware.load(hw_slug).resolve("bf16", jnp.float64))
    t = ref.as_floats(models.target(models.load_architecture(target), dtype=jnp.float64))
    d = ref.as_floats(models.Model.zeros(jnp.float64)) if draft is None else ref.as_floats(
        models.target(models.load_architecture(draft), dtype=jnp.float64))
    return ref.speedup(hw, t, d, batch, k, alpha, ctx)


def write_csv(path, lines):
    path.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
    return path


def test_validate_hand_computed_errors(tmp_path):
    preds = [ref_speedup("llama-3.1-8b", "h100-sxm", b, 3, 0.6, 500.0) for b in (1, 64, 256)]
    factors = [0.8, 1.1, 0.5]  # predicted / measured
    lines = [f"A,llama-3.1-8b,ngram,,h100-sxm,1,{b},3,0.6,,500,bf16,{p / f!r},throughput,no,https://x.org/a"
             for b, p, f in zip((1, 64, 256), preds, factors)]
    # series B gives no acceptance: alpha is fitted on its batch-1 row (the anchor, not scored)
    pb = ref_speedup("llama-3.1-8b", "h100-sxm", 1, 2, 0.7, 100.0)
    pb64 = ref_speedup("llama-3.1-8b", "h100-sxm", 64, 2, 0.7, 100.0)
    lines += [f"B,llama-3.1-8b,ngram,,h100-sxm,1,1,2,,,100,bf16,{pb!r},latency,no,https://x.org/b",
              f"B,llama-3.1-8b,ngram,,h100-sxm,1,64,2,,,100,bf16,{pb64 / 1.3!r},latency,no,https://x.org/b"]
    rows = measured.load(write_csv(tmp_path / "m.csv", lines))
    import jax

    jax.config.update("jax_enable_x64", True)
    df, s = validate.evaluate(rows, dtype=jnp.float64)
    apes = sorted([0.2, 0.1, 0.5, 0.3])  # |pred/meas - 1| per scored row
    assert s["rows"] == 4 and s["rows_skipped"] == 1
    assert s["median_ape"] == pytest.approx(np.median(apes), rel=1e-6)
    assert s["p90_ape"] == pytest.approx(0.3 + 0.7 * (0.5 - 0.3), rel=1e-6)  # linear interpolation at 0.9*(4-1)
    b_alpha = df.filter(df["series"] == "B")["alpha"][0]
    assert b_alpha == pytest.approx(0.7, abs=1e-6)  # the anchor recovers the alpha used to make it
    meas_a = [p / f for p, f in zip(preds, factors)]
    side = [(p > 1) == (m > 1) for p, m in zip(preds, meas_a)] + [(pb64 > 1) == (pb64 / 1.3 > 1)]
    assert s["side_accuracy"] == pytest.approx(np.mean(side))
    # series A: predicted and measured orderings over batch
    rank_p, rank_m = np.argsort(np.argsort(preds)), np.argsort(np.argsort(meas_a))
    rho = np.corrcoef(rank_p, rank_m)[0, 1]
    assert s["spearman_median"] == pytest.approx(rho)


BAD_ROWS = [
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,1,3,1.5,,500,bf16,1.2,throughput,no,u", "line 2, column acceptance_rate: '1.5'"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,abc,3,0.5,,500,bf16,1.2,throughput,no,u", "line 2, column batch: 'abc'"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,1,3,,5,500,bf16,1.2,throughput,no,u", "column accepted_length: '5'"),
    ("A,llama-9b,ngram,,h100-sxm,1,1,3,0.5,,500,bf16,1.2,throughput,no,u", "column target: 'llama-9b'"),
    ("A,llama-3.1-8b,ngram,,h100-sxn,1,1,3,0.5,,500,bf16,1.2,throughput,no,u", "column hardware: 'h100-sxn'"),
    ("A,llama-3.1-8b,eagle,,h100-sxm,1,1,3,0.5,,500,bf16,1.2,throughput,no,u", "column draft: ''"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,1,3,0.5,,500,bf16,-1,throughput,no,u", "column measured_speedup: '-1'"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,1,3,0.5,,500,bf16,1.2,speed,no,u", "column metric: 'speed'"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,0,1,3,0.5,,500,bf16,1.2,throughput,no,u", "column tp: '0'"),
    ("A,llama-3.1-8b,ngram,,h100-sxm,1,1,3,0.5,,nan,bf16,1.2,throughput,no,u", "column context: 'nan'"),
]


@pytest.mark.parametrize("line,msg", BAD_ROWS)
def test_malformed_rows_name_line_and_column(tmp_path, line, msg):
    ok = "A,llama-3.1-8b,ngram,,h100-sxm,1,4,3,0.5,,500,bf16,1.2,throughput,no,u"
    with pytest.raises(SpecError, match=msg.replace("(", r"\(")):
        measured.load(write_csv(tmp_path / "bad.csv", [line, ok]))


def test_malformed_files(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("series,target\nA,llama-3.1-8b\n")
    with pytest.raises(SpecError, match="missing column 'drafter'"):
        measured.load(p)
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError, match="not UTF-8"):
        measured.load(p)
    p.write_text(HEADER + ",extra\n")
    with pytest.raises(SpecError, match="unknown column 'extra'"):
        measured.load(p)


def _synthetic_rows(true, with_times, noise, seed=0):
    """Rows generated by the model itself under a `true` hardware profile, with multiplicative noise."""
    import jax

    rng = np.random.default_rng(seed)
    prof = hardware.load("h100-sxm").with_rates(**true)
    base = measured.Row(line=0, series="", target="", drafter="ngram", draft=None, hardware="h100-sxm", tp=1,
                        batch=1.0, k=3, alpha=0.6, tau=None, context=500.0, weight_dtype="bf16", speedup=1.0,
                        metric="throughput", source_url="synthetic")
    rows = []
    configs = [("llama-3.1-8b", "eagle", "eagle3-llama-3.1-8b"), ("qwen3-8b", "model", "qwen3-0.6b"),
               ("llama-3.1-8b", "ngram", None), ("qwen3-30b-a3b", "ngram", None)]
    for s_i, (tgt, drafter, draft) in enumerate(configs * 3):
        alpha = float(rng.uniform(0.5, 0.85))
        k = int(rng.integers(2, 6))
        ctx = float(rng.choice([200.0, 2000.0, 8000.0]))
        for b in (1, 4, 16, 64, 128, 256, 512):
            rows.append(dataclasses.replace(base, line=len(rows) + 2, series=f"s{s_i}", target=tgt, drafter=drafter,
                                            draft=draft, batch=float(b), k=k, alpha=alpha, context=ctx))
    stacked = measured.stack(rows, {"h100-sxm": prof}, jnp.float64)
    from specjax.cost.speculative import step

    r = jax.vmap(step)(*stacked)
    out = []
    for i, row in enumerate(rows):
        f = lambda: float(np.exp(noise * rng.standard_normal()))  # noqa: E731
        out.append(dataclasses.replace(row, speedup=float(r.speedup[i]) * f(),
                                       t_base_s=float(r.t_target_s[i]) * f() if with_times else None,
                                       t_sd_step_s=float(r.t_sd_step_s[i]) * f() if with_times else None))
    return out


def test_calibration_recovers_known_efficiencies_from_step_times():
    import jax

    jax.config.update("jax_enable_x64", True)
    true = dict(flops_efficiency=0.6, hbm_efficiency=0.8, fixed_overhead_s=2e-4)
    rows = _synthetic_rows(true, with_times=True, noise=0.01)
    cal = calibrate.fit(rows, holdout_fraction=0.0, steps=1500, fit_overlap=False, dtype=jnp.float64)
    got = cal.values["h100-sxm"]
    assert got["flops_efficiency"] == pytest.approx(0.6, rel=0.02), got
    assert got["hbm_efficiency"] == pytest.approx(0.8, rel=0.02), got
    # the overhead is small next to millisecond passes, so 1% noise moves it more
    assert got["fixed_overhead_s"] == pytest.approx(2e-4, rel=0.05), got
    assert cal.loss_history[-1] < cal.loss_history[0] / 10


def test_calibration_from_speedups_only_recovers_relative_values():
    """Speedups fix eta_F / eta_W and T_fixed * eta_W; with eta_W held at its true value both follow."""
    import jax

    jax.config.update("jax_enable_x64", True)
    true = dict(flops_efficiency=0.55, hbm_efficiency=0.9, fixed_overhead_s=2e-4, non_overlap=0.3)
    rows = _synthetic_rows(true, with_times=False, noise=0.005, seed=1)
    cal = calibrate.fit(rows, holdout_fraction=0.0, hbm_efficiency=0.9, steps=2000, dtype=jnp.float64)
    got = cal.values["h100-sxm"]
    assert got["flops_efficiency"] == pytest.approx(0.55, rel=0.02)
    assert got["non_overlap"] == pytest.approx(0.3, abs=0.03)
    assert got["fixed_overhead_s"] == pytest.approx(2e-4, rel=0.05)


def test_split_is_deterministic_and_by_series():
    names = [f"series-{i}" for i in range(100)]
    train, held = calibrate.split_series(names, 0.3)
    assert set(train).isdisjoint(held) and len(train) + len(held) == 100 and 15 < len(held) < 45
    assert calibrate.split_series(names, 0.3) == (train, held)


def test_cli_validate_and_calibrate(tmp_path, capsys):
    data = tmp_path / "m.csv"
    lines = []
    for s, (a, k) in enumerate([(0.6, 3), (0.7, 2), (0.8, 4), (0.5, 3)]):
        for b in (1, 16, 64, 128):
            p = ref_speedup("llama-3.1-8b", "h100-sxm", b, k, a, 400.0)
            lines.append(f"S{s},llama-3.1-8b,ngram,,h100-sxm,1,{b},{k},{a},,400,bf16,{p * 0.97!r},throughput,no,u")
    write_csv(data, lines)
    with pytest.raises(SystemExit) as e:
        main(["validate", str(data), "--json", "--out", str(tmp_path / "rows.csv")])
    out = capsys.readouterr().out.strip().splitlines()[-1]
    s = json.loads(out)
    assert e.value.code == 0 and set(s) == {"rows", "rows_skipped", "median_ape", "p90_ape", "side_accuracy",
                                            "spearman_median"}
    assert s["rows"] == 16 and s["median_ape"] == pytest.approx(1 / 0.97 - 1, rel=1e-4)
    assert (tmp_path / "rows.csv").read_text().startswith("line,series")
    prof = tmp_path / "p.toml"
    with pytest.raises(SystemExit) as e:
        main(["calibrate", str(data), "--out", str(prof), "--steps", "200", "--holdout-fraction", "0.25", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert e.value.code == 0 and prof.exists() and r["hardware"] == "h100-sxm"
    loaded = hardware.load(str(prof))
    assert loaded.calibrated_for == "h100-sxm" and 0 < loaded.flops_efficiency <= 1
    with pytest.raises(SystemExit) as e:  # the profile works wherever a hardware preset does
        main(["point", "--target", "llama-3.1-8b", "--hardware", str(prof), "--batch", "8", "--alpha", "0.6",
              "--drafter", "ngram", "--json"])
    assert e.value.code == 0 and json.loads(capsys.readouterr().out)["speedup"] > 0
    with pytest.raises(SystemExit) as e:
        main(["validate", str(data), "--hardware-profile", str(prof), "--json"])
    assert e.value.code == 0
    after = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert after["rows"] == 16


def test_public_data_ships_and_validates():
    import pathlib

    rows = measured.load(pathlib.Path(__file__).parents[1] / "data" / "measured" / "public.csv")
    assert len(rows) == 248
    df, s = validate.evaluate(rows)
    assert s["rows"] + s["rows_skipped"] == 248
    assert s["median_ape"] < 0.15 and s["side_accuracy"] > 0.8  # the uncalibrated roofline, as documented
