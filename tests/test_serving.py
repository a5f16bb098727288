"""The serving load of docs/model.md §10: the affine closed form, Little's law, saturation at the right rate,
the low-rate limit, the plain-Python reference (another algorithm), SLO search, the switch-off rate and
its sensitivities against finite differences, and `specjax serve` at the edge."""

import json
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import polars as pl
import pytest

import reference as ref
from specjax import api
from specjax.cli import main
from specjax.cost.speculative import step
from specjax.cost.trees import Load
from specjax.errors import SpecError
from specjax.inputs.scenario import Scenario
from specjax.search import serving

F64 = jnp.float64
BLOG = dict(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1, k=4,
            alpha=0.7, engine="vllm", input_len=256, output_len=256)


SERVE = jax.jit(serving.serve)
# The rate curve with its sensitivities: one program for the curve's own tests and the finite differences of the
# switch-off rate (its first output is `rate_curve`'s answer; a separate jit of `rate_curve` would compile again).
SENS = jax.jit(serving.switch_off_sensitivity)
WITHIN = jax.jit(serving.max_qps_within)


def curve(hw, dep, tgt, dr, dec):
    return SENS(hw, dep, tgt, dr, dec)[0]


def built(**kw):
    return Scenario(**{**BLOG, **kw}).build(F64)


def load(**kw):
    v = dict(qps=1.0, input_len=512.0, output_len=256.0, max_num_seqs=256.0, chunk_tokens=2048.0, **kw)
    return Load(**{k: F64(x) for k, x in v.items()})


@pytest.mark.parametrize("qps", [0.5, 3.0, 9.0])
def test_affine_step_gives_the_closed_form(qps):
    a, b, tau, c_p = 0.02, 2e-4, 2.5, 3e-5  # t_step(B) = a + b B
    ld = load()
    t_of = lambda x: a + b * x  # noqa: E731
    n = float(ld.output_len) / tau
    want = qps * n * a / (1.0 - qps * (n * b + float(ld.input_len) * c_p))
    assert want > 1  # the affine form holds above one sequence
    got, sat, lam_cap, t_got = serving.batch(t_of, F64(tau), F64(c_p), ld, F64(1e4), F64(qps), 56)
    assert not bool(sat)
    assert float(got) == pytest.approx(want, rel=1e-12)
    assert float(t_got) == a + b * float(got)  # the step time at the answer, evaluated there
    assert float(lam_cap) == 1e4 / (n * (a + b * 1e4) + 1e4 * float(ld.input_len) * c_p)
    # below one sequence the engine runs one at a time: B = qps N t(1) / (1 - qps L_in c_p)
    tiny = 0.01
    got, _, _, t_got = serving.batch(t_of, F64(tau), F64(c_p), ld, F64(1e4), F64(tiny), 56)
    assert float(got) == pytest.approx(tiny * n * (a + b) / (1 - tiny * float(ld.input_len) * c_p), rel=1e-12)
    assert float(t_got) == a + b


def test_littles_law_and_the_reference_on_the_kernel():
    hw, dep, tgt, dr, dec = built()
    m = serving.sides(hw, dep, tgt, dr, dec)
    ctx = 256 + 128.0
    h, t, d = ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr)
    lay = ref.layout_of(4.0, draft_tp=1.0)
    c_base = ref.prefill_per_token(t, h, 256.0, lay)
    c_sd = c_base + ref.prefill_per_token(d, h, 256.0, ref.drafter_layout(lay))
    assert [float(x) for x in m.c_p] == pytest.approx([c_base, c_sd], rel=1e-12)
    tau = float(m.tau[1])
    for qps in (0.05, 2.0, 12.0, 18.0):
        s = SERVE(hw, dep, tgt, dr, dec, F64(qps))
        for side, tau_s, cp, i in ((s.base, 1.0, c_base, 0), (s.sd, tau, c_sd, 1)):
            b, it = float(side.batch), float(side.iteration_s)
            assert b == pytest.approx(qps * 256.0 / tau_s * it, rel=1e-9)  # Little's law: B = lambda N T
            times = lambda x, i=i: ref.step_times(h, t, d, x, 4.0, 0.7, ctx, lay=lay)[1 + i]  # noqa: E731
            rb, rt, rtpot, rttft, rsat = ref.serve_side(times, tau_s, cp, 256.0, 256.0, float(m.cap[i]), qps)
            assert not rsat and not bool(side.saturated)
            assert b == pytest.approx(rb, rel=1e-9)
            assert float(side.tpot_s) == pytest.approx(rtpot, rel=1e-9)
            assert float(side.ttft_s) == pytest.approx(rttft, rel=1e-9)
            assert float(side.e2e_s) == pytest.approx(rttft + 255 * rtpot, rel=1e-9)
            assert float(side.throughput_tok_s) == pytest.approx(qps * 256.0, rel=1e-12)


def test_saturation_at_the_right_rate():
    hw, dep, tgt, dr, dec = built(max_num_seqs=64)
    m = serving.sides(hw, dep, tgt, dr, dec)
    lam_b, lam_s = (float(x) for x in serving.capacities(hw, dep, tgt, dr, dec))
    # by hand: the rate at which the batch reaches its cap, B_cap / (N t(B_cap) + B_cap L_in c_p)
    t_cap = [float(x) for x in m.t_of(m.cap)]
    cap = [float(x) for x in m.cap]
    assert cap == [64.0, 64.0]
    tau = float(m.tau[1])
    for lam, i, n in ((lam_b, 0, 256.0), (lam_s, 1, 256.0 / tau)):
        assert lam == pytest.approx(cap[i] / (n * t_cap[i] + cap[i] * 256.0 * float(m.c_p[i])), rel=1e-12)
    for lam, which in ((lam_b, "base"), (lam_s, "sd")):
        below = getattr(SERVE(hw, dep, tgt, dr, dec, F64(lam * 0.999)), which)
        above = getattr(SERVE(hw, dep, tgt, dr, dec, F64(lam * 1.001)), which)
        assert not bool(below.saturated) and float(below.batch) < 64.0
        assert bool(above.saturated) and math.isinf(float(above.ttft_s))
        assert float(above.throughput_tok_s) == pytest.approx(lam * 256.0, rel=1e-12)  # served at capacity
    # the reference's independent test of the fixed point agrees on the threshold
    h, t, d = ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr)
    lay = ref.layout_of(4.0, draft_tp=1.0)
    times = lambda x: ref.step_times(h, t, d, x, 4.0, 0.7, 384.0, lay=lay)[1]  # noqa: E731
    assert not ref.serve_side(times, 1.0, float(m.c_p[0]), 256.0, 256.0, 64.0, lam_b * 0.999)[4]
    assert ref.serve_side(times, 1.0, float(m.c_p[0]), 256.0, 256.0, 64.0, lam_b * 1.001)[4]


def test_low_rate_ratio_is_the_batch_1_speedup():
    sc = Scenario(**BLOG)
    hw, dep, tgt, dr, dec = sc.build(F64)
    s = SERVE(hw, dep, tgt, dr, dec, F64(1e-7))
    at_1 = step(hw, dep, tgt, dr, dec.replace(batch=F64(1.0), context=F64(256 + 128.0)))
    assert float(s.speedup_tpot) == pytest.approx(float(at_1.speedup), rel=1e-6)
    assert float(s.base.batch) < 1e-4 and float(s.sd.batch) < float(s.base.batch)  # fewer steps per request


def test_switch_off_rate_and_slo_search():
    hw, dep, tgt, dr, dec = built()
    rc = curve(hw, dep, tgt, dr, dec)
    off = float(rc.switch_off_qps)
    assert float(rc.qps_low) < off < float(rc.max_qps_sd) < float(rc.max_qps_base)
    below = SERVE(hw, dep, tgt, dr, dec, F64(off * 0.99))
    above = SERVE(hw, dep, tgt, dr, dec, F64(off * 1.01))
    assert float(below.speedup_tpot) > 1.0 > float(above.speedup_tpot)
    assert float(serving.pays(SERVE(hw, dep, tgt, dr, dec, F64(off)))) == pytest.approx(0.0, abs=1e-6)
    slo = 0.02
    b, s = (float(x) for x in WITHIN(hw, dep, tgt, dr, dec, F64(slo), F64(jnp.inf)))
    for lam, which in ((b, "base"), (s, "sd")):
        assert float(getattr(SERVE(hw, dep, tgt, dr, dec, F64(lam)), which).tpot_s) <= slo * (1 + 1e-9)
        assert float(getattr(SERVE(hw, dep, tgt, dr, dec, F64(lam * 1.01)), which).tpot_s) > slo
    assert s > b  # speculation meets a tight TPOT target at twice the rate here
    none = WITHIN(hw, dep, tgt, dr, dec, F64(1e-4), F64(jnp.inf))
    assert [float(x) for x in none] == [0.0, 0.0]  # no rate meets an impossible target


def test_a_rate_that_only_speculation_cannot_sustain_does_not_pay():
    """A side whose queue grows where the other's does not loses, whatever its TPOT ratio says."""
    def side(sat):
        return serving.Side(*(F64(1.0),) * 6, saturated=jnp.asarray(sat), fits=jnp.asarray(True))

    def served(sat_base, sat_sd, ratio):
        return serving.Served(F64(1.0), side(sat_base), side(sat_sd), F64(ratio), F64(1.0), F64(2.0), 0)

    assert float(serving.pays(served(False, True, 1.3))) < 0
    assert float(serving.pays(served(True, False, 0.8))) > 0
    assert float(serving.pays(served(False, False, 1.3))) == pytest.approx(0.3)
    assert float(serving.pays(served(True, True, 0.8))) == pytest.approx(-0.2)


def test_switch_off_sensitivity_matches_finite_differences():
    hw, dep, tgt, dr, dec = built()
    rc, deriv, elast = SENS(hw, dep, tgt, dr, dec)
    off = float(rc.switch_off_qps)
    for name, tree, field in (("alpha", "op", "alpha"), ("hbm_bytes_per_s", "hw", "hbm_bytes_per_s"),
                              ("output_len", "load", "output_len")):
        def moved(x):
            t = dict(hw=hw, op=dec, load=dec.load)[tree].replace(**{field: F64(x)})
            h, d = (t, dec) if tree == "hw" else (hw, t if tree == "op" else dec.replace(load=t))
            return float(curve(h, dep, tgt, dr, d).switch_off_qps)  # the search at the moved input

        x0 = float(getattr(dict(hw=hw, op=dec, load=dec.load)[tree], field))
        e = 1e-4 * x0
        fd = (moved(x0 + e) - moved(x0 - e)) / (2 * e)
        assert float(deriv[name]) == pytest.approx(fd, rel=2e-3), name
        assert float(elast[name]) == pytest.approx(fd * x0 / off, rel=2e-3), name
    assert "context" not in elast  # the lengths set the context


def test_api_and_cli_keys(capsys):
    r = api.serve(Scenario(**BLOG), [1.0, 40.0], tpot_slo=0.02)
    p = r["points"]
    keys = {"qps", "batch_base", "batch_sd", "tpot_base_s", "tpot_sd_s", "ttft_base_s", "ttft_sd_s", "e2e_base_s",
            "e2e_sd_s", "throughput_base_tok_s", "throughput_sd_tok_s", "speedup_tpot", "status_base", "status_sd"}
    assert keys <= set(p[0])
    assert (p[0]["status_base"], p[0]["status_sd"]) == ("ok", "ok")
    assert (p[1]["status_base"], p[1]["status_sd"]) == ("saturated", "saturated") and p[1]["ttft_sd_s"] is None
    assert {"max_qps_base", "max_qps_sd", "switch_off_qps", "slo"} <= set(r)
    assert r["slo"]["max_qps_sd"] > r["slo"]["max_qps_base"] > 0
    assert r["inputs"]["context"] == 384 and "batch" not in r["inputs"]
    args = ["serve", "--target", "llama-3-70b", "--hardware", "h100-sxm", "--drafter", "model", "--draft",
            "qwama-0.5b", "--tp", "4", "--draft-tp", "1", "--k", "4", "--alpha", "0.7", "--engine", "vllm",
            "--input-len", "256", "--output-len", "256", "--qps", "1", "--qps", "40"]
    with pytest.raises(SystemExit) as e:
        main(args + ["--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["points"][0]["tpot_sd_s"] == pytest.approx(p[0]["tpot_sd_s"], rel=1e-6)
    assert out["switch_off_qps"] == pytest.approx(r["switch_off_qps"], rel=1e-6)
    with pytest.raises(SystemExit) as e:
        main(args)
    text = capsys.readouterr().out
    assert e.value.code == 0 and "switch-off rate" in text and "sd_saturated" not in text


@pytest.mark.parametrize("extra,msg", [
    (["--qps", "0"], "qps=0.0; expected 0 < qps <= 1e7 (requests/s)"),
    (["--qps", "1", "--output-len", "0"], "output_len=0"),
    (["--qps", "1", "--max-num-seqs", "0"], "max_num_seqs=0"),
    (["--qps", "1", "--tpot-slo", "-1"], "tpot_slo=-1.0; expected 0 < tpot_slo < 1e6 (seconds)"),
])
def test_serve_bad_input(capsys, extra, msg):
    args = ["serve", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.6"]
    with pytest.raises(SystemExit) as e:
        main(args + extra)
    err = capsys.readouterr().err
    assert e.value.code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_a_load_needs_both_lengths():
    with pytest.raises(SpecError, match="needs input_len and output_len"):
        Scenario(engine="roofline",
                 target="llama-3.1-8b", hardware="h100-sxm", drafter="ngram", alpha=0.6, qps=2.0, input_len=100)
    sc = Scenario(engine="roofline", target="llama-3.1-8b", hardware="h100-sxm", drafter="ngram", alpha=0.6)
    assert sc.build()[4].load is None and np.isfinite(float(step(*sc.build()).speedup))


SPEC = """
name = "serve_tiny"
hardware = ["h100-sxm"]
engine = "vllm"
[[pairs]]
target = "llama-3-70b"
drafter = "model"
draft = "qwama-0.5b"
tp = 4
draft_tp = 1
[fixed]
k = 4
alpha = 0.7
max_num_seqs = 256
{extra}
[axes]
{axes}
[reduce]
kind = "{kind}"
"""


def test_serve_and_switch_off_qps_sweeps_match_the_api(tmp_path):
    from specjax.engine import sweep
    from specjax.inputs import spec
    from specjax.outputs import io

    s = spec.from_text(SPEC.format(extra="input_len = 256", axes="output_len = [128, 256]\nqps = [1.0, 18.0, 40.0]",
                                   kind="serve"), "serve.toml")
    sweep.run(s, tmp_path / "a")
    df = io.read_results(tmp_path / "a").collect().sort("output_len_tokens", "qps_req_s")
    assert df.height == 6 and "context_tokens" not in df.columns
    from specjax.outputs import report

    figs = report.serving_figures(df, tmp_path / "figs")  # the report draws one figure per pair
    assert len(figs) == 1 and "<svg" in figs[0][1] and "output_len" not in figs[0][0]
    # the API at each (output_len, qps) of the grid, two rates a call: the compiled shape of test_api_and_cli_keys
    # (each rate's point is its own, whatever the other rate of the call; three rates a call would compile again)
    want = {(o, q): p for o in (128, 256) for pair in ([1.0, 18.0], [18.0, 40.0])
            for q, p in zip(pair, api.serve(Scenario(**{**BLOG, "output_len": o, "max_num_seqs": 256}),  # as [fixed]
                                            pair)["points"])}
    for row in df.iter_rows(named=True):
        p = want[row["output_len_tokens"], row["qps_req_s"]]
        assert row["status"] == p["status"]
        for key in ("batch_sd", "tpot_base_s", "tpot_sd_s", "speedup_tpot"):
            assert row[key] == pytest.approx(p[key], rel=1e-5), key
    s = spec.from_text(SPEC.format(extra="input_len = 256", axes="output_len = [256]", kind="switch_off_qps"),
                       "rate.toml")
    sweep.run(s, tmp_path / "b")
    row = io.read_results(tmp_path / "b").collect().row(0, named=True)
    r = api.serve(Scenario(**BLOG, max_num_seqs=256), [1.0, 40.0],
                  tpot_slo=0.02)  # the shapes of test_api_and_cli_keys: one compile
    assert row["status"] == r["curve_status"] == "stops_paying"
    for key in ("switch_off_qps", "max_qps_sd", "max_qps_base", "speedup_tpot_low_qps"):
        assert row[key] == pytest.approx(r[key], rel=1e-5), key
    with_sens = SPEC.format(extra="input_len = 256\n[sensitivity]\ninputs = [\"alpha\", \"output_len\"]",
                            axes="output_len = [256]", kind="switch_off_qps")
    assert spec.from_text(with_sens, "rate.toml").sensitivity == ("alpha", "output_len")
    with pytest.raises(SpecError, match="unknown sensitivity input 'context'"):
        spec.from_text(with_sens.replace('"output_len"]', '"context"]'), "rate.toml")


@pytest.mark.parametrize("extra,axes,kind,msg", [
    ("input_len = 256", "batch = [1, 2]", "none", "input_len is an input of a serving load"),
    ("", "qps = [1.0]", "serve", "give input_len in [fixed] or [axes]"),
    ("input_len = 256\noutput_len = 64", "output_len = [1]", "serve", "both in [fixed] and in [axes]"),
    ("input_len = 256\noutput_len = 64", "context = [100, 200]", "serve", "searches context itself"),
    ("input_len = 256\noutput_len = 64", "qps = [2.0]", "switch_off_qps", "searches qps itself"),
    ("input_len = 256\noutput_len = 64", "alpha = [0.5]", "serve", "give qps in [fixed] or [axes]"),
])
def test_bad_serving_specs(extra, axes, kind, msg):
    from specjax.inputs import spec

    text = SPEC.format(extra=extra, axes=axes, kind=kind).replace("alpha = 0.7\n", "" if "alpha" in axes else
                                                                 "alpha = 0.7\n")
    with pytest.raises(SpecError, match=re.escape(msg)):
        spec.from_text(text, "bad.toml")


def test_serving_figure_draws_what_the_api_says(tmp_path):
    from specjax.outputs import curves, plots

    scs = {f"alpha={a}": Scenario(**{**BLOG, "alpha": a}) for a in (0.5, 0.7)}
    df, marks = curves.serving_grid(scs, points=9)
    fig, data = plots.serving_figure(df, marks)
    assert data.height == 2 and df.height == 18
    for row in data.iter_rows(named=True):
        assert row["switch_off_qps"] == pytest.approx(marks[row["series"]]["switch_off_qps"])
    assert marks["alpha=0.7"]["switch_off_qps"] > marks["alpha=0.5"]["switch_off_qps"]
    assert len(plots.save(fig, tmp_path / "serving")) == 2


RATE_CSV = ("series,target,drafter,draft,hardware,tp,draft_tp,k,acceptance_rate,accepted_length,weight_dtype,"
            "metric,approximate,source_url,engine,qps,input_len,output_len,measured_ratio\n") + """fit,llama-3-70b,model,qwama-0.5b,h100-sxm,4,1,4,,,bf16,e2e_request_latency,1,https://a.example/x,vllm,1,220,200,1.5
fit,llama-3-70b,model,qwama-0.5b,h100-sxm,4,1,4,,,bf16,e2e_request_latency,1,https://a.example/x,vllm,20,220,200,0.71
given,llama-3-70b,model,qwama-0.5b,h100-sxm,4,1,4,0.6,,bf16,tpot,1,https://b.example/y,vllm,1,220,200,1.4
given,llama-3-70b,model,qwama-0.5b,h100-sxm,4,1,4,0.6,,bf16,tpot,1,https://b.example/y,vllm,16,220,200,1.2
"""


def test_validate_rows_per_request_rate(tmp_path):
    from specjax.engine import validate
    from specjax.inputs import measured

    p = tmp_path / "rate.csv"
    p.write_text(RATE_CSV)
    df, summary = validate.evaluate(measured.load(p))
    assert summary["rows"] == 4 and summary["rows_anchor"] == 1 and summary["rows_scored"] == 3
    assert summary["level"]["rows_scored"] == 1  # the given series' lowest rate
    anchor = df.filter(pl.col("role") == "anchor").row(0, named=True)
    assert anchor["qps"] == 1.0 and anchor["predicted_speedup"] == pytest.approx(1.5, rel=1e-4)
    given = df.filter(pl.col("series") == "given").sort("qps")
    sc = Scenario(**{**BLOG, "alpha": 0.6, "input_len": 220, "output_len": 200})
    want = api.serve(sc, [1.0, 16.0])["points"]
    assert given["predicted_speedup"].to_list() == pytest.approx([w["speedup_tpot"] for w in want], rel=1e-5)
    assert given["role"].to_list() == ["level", "shape"]
    # the fitted alpha is shared across the series' rates, so the high-rate row is a real prediction
    fit = df.filter(pl.col("series") == "fit").sort("qps")
    assert fit["alpha"].n_unique() == 1 and fit["role"].to_list() == ["anchor", "shape"]
    assert fit["predicted_speedup"][1] > 0.71  # the model under-predicts this made-up slowdown: scored, not hidden


@pytest.mark.parametrize("edit,msg", [
    (lambda t: t.replace(",1,220,200,1.5", ",1,220,,1.5"), "line 2, column output_len: ''; expected a value"),
    (lambda t: t.replace("e2e_request_latency,1,https://a.example/x,vllm,1,", "throughput,1,https://a.example/x,vllm,1,"),
     "line 2, column metric: 'throughput'; expected e2e_request_latency or tpot (a row per request rate)"),
    (lambda t: t.replace(",measured_ratio\n", ",measured_ratioX\n"),
     "unknown column 'measured_ratioX'"),
    (lambda t: t.replace(",measured_ratio\n", ",measured_speedup\n"), "missing column 'batch'"),
    (lambda t: t.replace("series,", "batch,series,").replace("\nfit,", "\n4,fit,", 1).replace("\nfit,", "\n,fit,")
     .replace("\ngiven,", "\n,given,"), "line 2, column batch: '4'; expected empty in a row per request rate"),
])
def test_bad_rate_rows(tmp_path, edit, msg):
    from specjax.inputs import measured

    p = tmp_path / "bad.csv"
    p.write_text(edit(RATE_CSV))
    with pytest.raises(SpecError, match=re.escape(msg)):
        measured.load(p)


def test_report_counts_a_rate_only_speculation_cannot_sustain_as_a_switch_off(tmp_path):
    from specjax.outputs import report

    df = pl.DataFrame(dict(hardware=["h"] * 3, pair=["p"] * 3, qps_req_s=[1.0, 2.0, 4.0], tpot_base_s=[0.02] * 3,
                           tpot_sd_s=[0.01, 0.012, 0.015], batch_base=[2.0, 4.0, 8.0], batch_sd=[1.0, 2.0, 64.0],
                           speedup_tpot=[2.0, 1.7, 1.3], status=["ok", "ok", "sd_saturated"]))
    (caption, svg), = report.serving_figures(df, tmp_path)
    assert "speculation (switch-off 2.66 req/s)" in svg  # between 2 and 4 req/s, though 1.3x at its capacity
    ok = df.with_columns(pl.lit("ok").alias("status"))
    (_, svg_ok), = report.serving_figures(ok, tmp_path)
    assert "speculation (switch-off" not in svg_ok and "pays at every sustainable rate" in svg_ok


# ---- acceptance that varies by request (docs/model.md §10.1; the kernels: tests/test_spread.py) ----------------
# Here because they run `serve`'s program, which this file compiles anyway (same shapes: two rates, float32).

SERVE_ARGS = ["serve", "--target", "llama-3-70b", "--hardware", "h100-sxm", "--drafter", "model", "--draft",
              "qwama-0.5b", "--tp", "4", "--draft-tp", "1", "--engine", "vllm", "--input-len", "256", "--output-len",
              "256", "--qps", "1", "--qps", "12", "--tpot-slo", "0.02"]


def test_request_spread_percentiles_against_a_simulation_and_the_means_unchanged():
    """At serve's own iteration time of each rate, 100k simulated requests (tests/reference.py) give serve's TPOT
    percentiles within 1% and its mean TPOT; batch, TPOT, E2E and the SLO rate on the mean are those without a
    spread (a spread changes no mean)."""
    from specjax.cost.spread import PERCENTILES

    rates = [1.0, 12.0]
    flat = api.serve(Scenario(**BLOG), rates, tpot_slo=0.02)
    r = api.serve(Scenario(**BLOG, acceptance_spread=0.8), rates, tpot_slo=0.02)
    for p, q in zip(r["points"], flat["points"]):
        for key in ("batch_sd", "tpot_sd_s", "itl_sd_s", "e2e_sd_s", "throughput_sd_tok_s", "batch_base"):
            assert p[key] == q[key], key
        sim = ref.request_tpot_simulation(p["itl_sd_s"], (0.7,), 4, 0.8)
        got = [p[f"tpot_sd_p{x:g}_s"] for x in PERCENTILES]
        assert got == pytest.approx(list(sim["percentiles"]), rel=1e-2)
        assert p["tpot_sd_s"] == pytest.approx(sim["mean_tpot"], rel=1e-5)  # float32 kernel
        assert got[0] < p["tpot_sd_s"] < got[1] < got[2]
    assert r["slo"] == flat["slo"]
    assert (r["switch_off_qps"], r["max_qps_sd"]) == (flat["switch_off_qps"], flat["max_qps_sd"])
    sp = r["acceptance_spread"]
    assert (sp["kind"], sp["sigma"], sp["samples"]) == ("log_odds", 0.8, None)
    assert sp["tokens_per_step"] == pytest.approx(r["tokens_per_step"], rel=1e-6)


def test_request_spread_zero_is_todays_tpot_exactly():
    mean = api.serve(Scenario(**BLOG), [1.0, 12.0], tpot_slo=0.02)
    p99 = api.serve(Scenario(**BLOG, acceptance_spread=0.0), [1.0, 12.0], tpot_slo=0.02, slo_percentile=99)
    for p, q in zip(p99["points"], mean["points"]):
        assert p["tpot_sd_p50_s"] == p["tpot_sd_p90_s"] == p["tpot_sd_p99_s"] == p["tpot_sd_s"] == q["tpot_sd_s"]
    assert p99["slo"]["max_qps_sd"] == mean["slo"]["max_qps_sd"] and p99["slo"]["tpot_percentile"] == 99


def test_the_slo_search_meets_the_named_percentile():
    """With a spread the p90 target binds before the mean one; at the rate found serve's p90 TPOT is the target
    (the bisection's edge); plain decoding (no spread) keeps its rate."""
    sc = Scenario(**BLOG, acceptance_spread=1.0)
    mean = api.serve(sc, [1.0, 12.0], tpot_slo=0.02)["slo"]
    p90 = api.serve(sc, [1.0, 12.0], tpot_slo=0.02, slo_percentile=90)["slo"]
    assert p90["max_qps_base"] == mean["max_qps_base"]
    assert 0 < p90["max_qps_sd"] < mean["max_qps_sd"]
    at = api.serve(sc, [p90["max_qps_sd"], mean["max_qps_sd"]])["points"]
    assert at[0]["tpot_sd_p90_s"] == pytest.approx(0.02, rel=1e-4)
    assert at[1]["tpot_sd_s"] == pytest.approx(0.02, rel=1e-4)


def test_request_samples_through_serve(tmp_path, capsys):
    """The three ingested requests of tests/test_spread.py (tau 1.5, 2, 3 at k = 2): the scenario's accepted
    length is their harmonic mean 2, its alpha the golden ratio's 0.618034, and serve's TPOT factors the hand
    values 1, 38/30, 1.326667, in JSON and text."""
    from test_spread import HAND, ingested_samples

    csv = ingested_samples(tmp_path, capsys)
    args = SERVE_ARGS + ["--k", "2", "--acceptance-samples", str(csv), "--slo-percentile", "90"]
    with pytest.raises(SystemExit) as e:
        main(args + ["--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    sp = out["acceptance_spread"]
    assert (sp["kind"], sp["samples"], sp["samples_file"]) == ("samples", 3, str(csv))
    assert (sp["tokens_per_step"], sp["mean_accepted_length_over_requests"]) == pytest.approx((2.0, 6.5 / 3), rel=1e-6)
    assert [sp[f"tpot_factor_p{p}"] for p in (50, 90, 99)] == pytest.approx(HAND, rel=1e-6)
    assert out["inputs"]["accepted_length"] == 2.0 and out["inputs"]["alpha"] == pytest.approx(0.618034, rel=1e-6)
    for p in out["points"]:
        assert p["tpot_sd_p90_s"] == pytest.approx(p["tpot_sd_s"] * 38 / 30, rel=1e-6)
    with pytest.raises(SystemExit) as e:
        main(args)
    text = capsys.readouterr().out
    assert e.value.code == 0 and "3 per-request samples" in text and "p50/p90/p99 = 1.000/1.267/1.327" in text
    assert "largest rate with p90 TPOT <= 20 ms" in text and " p99 sd " in text
