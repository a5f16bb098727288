"""Plain step-time rows (`inputs.steps`, the schema of data/measured/serving_steps.csv) in validate:
parsing and skipping, the predicted quantity per metric and load, and the `plain_steps` block."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

from specjax.cost.speculative import step
from specjax.engine import validate
from specjax.errors import SpecError
from specjax.inputs import engines, measured, steps

HEADER = ("series,target,hardware,engine,engine_version,tp,ep,dp_attention,weight_dtype,kv_dtype,concurrency,qps,"
          "input_len,output_len,dataset,metric,value_s,t_base_s,approximate,source_url,note")
ROWS = [
    "A,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,bf16,,1,,1000,200,random,tpot,0.01,0.01,no,https://a.org/1,",
    "A,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,bf16,,32,,1000,200,random,inv_tput,0.02,0.02,no,https://a.org/1,",
    "A,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,bf16,fp8,32,,1000,200,random,e2e_request_latency,4,4,no,https://a.org/1,",
    "B,llama-3.1-8b,no-such-gpu,vllm,x,1,1,1,bf16,,8,,1000,200,random,tpot,0.01,0.01,no,https://b.org/2,",
]


def write(tmp_path, rows, header=HEADER):
    p = tmp_path / "steps.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


def test_rows_parse_and_an_unknown_gpu_is_skipped_with_its_reason(tmp_path):
    rows = measured.load(write(tmp_path, ROWS))
    assert [r.is_step for r in rows] == [True] * 4 and rows[2].kv_dtype == "fp8" and rows[1].load_kind == "concurrency"
    assert rows[3].unsupported and "no-such-gpu" in rows[3].unsupported
    df, s = validate.evaluate(rows)
    p = s["plain_steps"]
    assert (p["rows"], p["rows_scored"], p["rows_unsupported"]) == (4, 3, 1) and s["rows"] == 0
    assert "no-such-gpu" in p["unsupported_reasons"][0]
    assert p["sources_scored"] == 1 and p["worst_source"]["source"] == "a.org/1"
    assert set(p["groups"]["metric"]) == {"tpot", "inv_tput", "e2e_request_latency"}


@pytest.mark.parametrize("edit, msg", [
    (lambda r: r.replace(",tpot,", ",tbt,"), "column metric: 'tbt'; expected one of inv_tput"),
    (lambda r: r.replace(",1,,1000", ",1,3,1000"), "exactly one of concurrency, qps and batch"),
    (lambda r: r.replace(",0.01,0.01,", ",-1,0.01,"), "column value_s: '-1'; expected seconds > 0"),
    (lambda r: r.replace(",bf16,,", ",bf16,fp7,"), "column kv_dtype: 'fp7'"),
    (lambda r: r.replace(",1,,1000", ",0,,1000"), "column concurrency: '0'"),
])
def test_bad_cells_name_line_column_value_and_range(tmp_path, edit, msg):
    with pytest.raises(SpecError, match=msg.replace("(", r"\(")):
        measured.load(write(tmp_path, [edit(ROWS[0])]))


def test_concurrency_satisfies_littles_law_and_metrics_follow():
    """N = X * E2E at the solved rate; inv_tput = N / (X L_out); tpot is the plain side's TPOT there."""
    import jax

    jax.config.update("jax_enable_x64", True)
    rows = steps.check_buildable([steps.StepRow(line=2, series="A", target="llama-3.1-8b", hardware="h100-sxm",
                                                tp=1, weight_dtype="bf16", input_len=1000.0, output_len=200.0,
                                                metric="inv_tput", value_s=0.02, source_url="u", engine="roofline",
                                                concurrency=32)])
    stacked = steps.stack(rows, [engines.load("roofline")], dtype=jnp.float64)
    h, p, t, d, x = (jax.tree.map(lambda a: a[0], tree) for tree in stacked)
    side = validate.plain_at_concurrency(h, p, t, d, x, jnp.float64(32.0))
    rate = side.throughput_req_s
    t_dec = step(h, p, t, d, x.replace(batch=side.batch)).t_target_s
    assert not bool(side.queued) and float(rate * side.e2e_s) == pytest.approx(32.0, rel=1e-6)
    assert 1.0 < float(side.batch) <= 32.0 and float(t_dec) <= float(side.iteration_s)
    codes = {m: validate.METRIC_CODES.index(m) for m in validate.METRIC_CODES}
    kind, n = jnp.asarray(0), jnp.float64(32.0)
    inv, _ = validate.plain_metric(h, p, t, d, x, kind, n, codes["inv_tput"])
    tpot, b = validate.plain_metric(h, p, t, d, x, kind, n, codes["tpot"])
    assert float(inv) == pytest.approx(32.0 / (float(rate) * 200.0), rel=1e-6)
    assert float(tpot) == pytest.approx(float(side.tpot_s), rel=1e-9) and float(b) == pytest.approx(float(side.batch))


def test_a_fixed_batch_row_is_the_plain_decode_step(tmp_path):
    """A row at a decode batch: decode_step is step()'s t_target_s at B and context L_in + L_out / 2."""
    from specjax.inputs.scenario import Scenario

    path = write(tmp_path, ["C,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,bf16,,,,1000,200,offline,decode_step,0.01,0.01,"
                            "no,https://c.org,,16"], HEADER + ",batch")
    df, s = validate.evaluate(measured.load(path))
    want = step(*Scenario("llama-3.1-8b", "h100-sxm", drafter="ngram", k=1, alpha=0.5, batch=16, context=1100,
                          engine="roofline").build()).t_target_s
    assert df["predicted_s"][0] == pytest.approx(float(want), rel=1e-5) and df["predicted_batch"][0] == 16


def test_cli_json_has_the_plain_block(tmp_path, capsys):
    from specjax.cli import main

    with pytest.raises(SystemExit) as e:
        main(["validate", str(write(tmp_path, ROWS[:2])), "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert e.value.code == 0 and out["plain_steps"]["rows_scored"] == 2
    assert np.isfinite(out["plain_steps"]["median_ape"])


def test_engine_file_is_used_for_plain_rows(tmp_path):
    """`validate --engine FILE` predicts plain step rows with that file's profile (it used to fall back to the
    `generic` preset for any name that is not a preset slug: the README's calibrate-then-validate loop
    silently checked plain rows against another profile). A copy of the vllm preset gives vllm's numbers,
    under the file's name."""
    import shutil

    from specjax.inputs import engines

    path = write(tmp_path, ["C,llama-3.1-8b,h100-sxm,vllm,x,1,1,1,bf16,,,,1000,200,offline,decode_step,0.01,0.01,"
                            "no,https://c.org,,16"], HEADER + ",batch")
    copy = tmp_path / "mine.toml"
    shutil.copy(engines.PRESET_DIR / "vllm.toml", copy)
    rows = measured.load(path)
    by_file, _ = validate.evaluate(rows, str(copy))
    by_name, _ = validate.evaluate(rows, "vllm")
    assert by_file["engine_profile"][0] == "mine" and by_name["engine_profile"][0] == "vllm"
    assert by_file["predicted_s"][0] == pytest.approx(by_name["predicted_s"][0], rel=1e-6)
    generic, _ = validate.evaluate(rows, "generic")
    assert abs(generic["predicted_s"][0] / by_file["predicted_s"][0] - 1) > 0.01  # the fallback would differ


def test_compute_dtype_column_sets_the_peak_the_gemms_run_at(tmp_path):
    """A row's `compute_dtype` (fp8 where the engine ran W8A8 FP8 GEMMs) charges prefill at that dtype's peak:
    a long-prompt closed loop whose iterations are prefill-heavy gets faster with fp8 than with the default
    bf16, by at most the 2x of the peaks; a decode step at batch 1 (memory-bound) hardly moves. A value
    outside the catalogue's choices is refused naming the column."""
    rows = ["L,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,fp8,,64,,8000,100,random,tpot,0.05,0.05,no,https://l.org,,{c}",
            "S,llama-3.1-8b,h100-sxm,roofline,x,1,1,1,fp8,,1,,100,100,random,tpot,0.01,0.01,no,https://s.org,,{c}"]
    bf, f8 = ([float(v) for v in validate.evaluate(measured.load(write(tmp_path, [r.format(c=c) for r in rows],
                                                                         HEADER + ",compute_dtype")))[0]["predicted_s"]]
              for c in ("", "fp8"))
    assert 1.15 < bf[0] / f8[0] <= 2.0 and bf[1] / f8[1] == pytest.approx(1.0, abs=0.02)
    allowed = "expected empty or one of bf16, fp16, fp8, fp4, int8"
    with pytest.raises(SpecError, match=f"column compute_dtype: 'fp6'; {allowed}"):
        measured.load(write(tmp_path, [rows[0].format(c="fp6")], HEADER + ",compute_dtype"))


def test_expert_dtype_column_quantises_the_routed_experts_only(tmp_path):
    """gpt-oss ships MXFP4 experts beside BF16 attention, embeddings and LM head: a plain row with weight_dtype
    bf16 and expert_dtype mxfp4 builds the config's own mixed precision (the same weight bytes as no dtype at
    all), where weight_dtype mxfp4 alone puts the ~2.1B non-expert weights (attention 0.97B, embeddings and LM
    head 0.58B each) in MXFP4 too (~3.1 GB less: 2.1B x (2 - 0.53) bytes); its decode step at one client is then
    predicted faster by that read.
    A value that is not a dtype is refused in one line naming the column."""
    row = "G,gpt-oss-120b,h100-sxm,roofline,x,1,1,1,{w},{e},,1,,1000,200,random,tpot,0.01,0.01,no,https://g.org,"
    header = HEADER.replace("weight_dtype,kv_dtype", "weight_dtype,expert_dtype,kv_dtype")
    mixed, all4 = (measured.load(write(tmp_path, [row.format(w=w, e=e)], header))[0] for w, e in
                   (("bf16", "mxfp4"), ("mxfp4", "")))
    assert (mixed.weight_dtype, mixed.expert_dtype, all4.expert_dtype) == ("bf16", "mxfp4", None)
    t_mixed, t_all4 = (s.scenario().build()[2] for s in (mixed, all4))
    default = dataclasses.replace(mixed.scenario(), weight_dtype=None, expert_dtype=None).build()[2]
    assert float(t_mixed.weight_bytes) == float(default.weight_bytes)
    assert 2.5e9 < float(t_mixed.weight_bytes) - float(t_all4.weight_bytes) < 3.5e9
    (pm, pa) = (float(validate.evaluate([r])[0]["predicted_s"][0]) for r in (mixed, all4))
    assert pm > pa
    with pytest.raises(SpecError) as e:
        measured.load(write(tmp_path, [row.format(w="bf16", e="fp5")], header))
    msg = str(e.value)
    assert "\n" not in msg and "line 2" in msg and "column expert_dtype: 'fp5'" in msg and "mxfp4" in msg
