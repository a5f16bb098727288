"""The command line, run for real: JSON keys, tables, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest

from specjax.cli import main

POINT = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "16", "--drafter", "eagle",
         "--draft", "eagle3-llama-3.1-8b", "--k", "3", "--alpha", "0.7", "--engine", "roofline"]


def replacing(base, extra):
    """`base` with every option that `extra` gives removed first (an option may appear only once)."""
    given = {a for a in extra if a.startswith("--")}
    if "--drafter" in given and extra[extra.index("--drafter") + 1] not in ("model", "eagle"):
        given.add("--draft")  # a drafter kind that takes no draft config
    out, skip = [], False
    for a in base:
        if skip:
            skip = False
            continue
        if a in given:
            skip = True
            continue
        out.append(a)
    return out + extra


def run(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_point_json(capsys):
    code, out, _ = run(capsys, POINT + ["--json"])
    assert code == 0
    r = json.loads(out)
    for key in ("speedup", "tokens_per_step", "alpha", "t_target_s", "t_draft_s", "t_verify_s", "t_sd_step_s",
                "throughput_base_tok_s", "throughput_sd_tok_s", "max_batch_base", "max_batch_sd", "feasible",
                "bound"):
        assert key in r
    assert r["tokens_per_step"] == pytest.approx(1 + 0.7 + 0.49 + 0.343, rel=1e-5)
    assert r["t_sd_step_s"] == pytest.approx(3 * r["t_draft_s"] + r["t_verify_s"], rel=1e-5)
    assert r["bound"] in ("memory", "compute") and r["feasible"] is True


def test_point_accepted_length_and_table(capsys):
    code, out, _ = run(capsys, ["point", "--target", "qwen3-8b", "--hardware", "h100-sxm", "--batch", "1",
                                "--drafter", "ngram", "--k", "3", "--accepted-length", "2.25"])
    assert code == 0 and "speedup" in out and "tokens_per_step" in out
    code, out, _ = run(capsys, ["point", "--target", "qwen3-8b", "--hardware", "h100-sxm", "--batch", "1",
                                "--drafter", "ngram", "--k", "3", "--accepted-length", "2.25", "--json"])
    assert json.loads(out)["tokens_per_step"] == pytest.approx(2.25, rel=1e-5)


def test_crossover_json(capsys):
    code, out, _ = run(capsys, ["crossover", "--target", "gpt-oss-120b", "--hardware", "h200", "--draft-cost",
                                "0.145", "--k", "2", "--alpha", "0.814", "--kv-dtype", "fp8", "--roofline", "pass",
                                "--engine", "roofline", "--json"])
    c = json.loads(out)
    assert code == 0 and c["status"] == "stops_paying" and c["beyond_memory"] is True
    assert set(c) >= {"crossover_batch", "crossover_batch_int", "first_crossing_batch", "dips", "pays_between",
                      "status", "speedup_at_batch_1", "max_batch_sd", "beyond_memory", "batch_bound", "grid_points",
                      "inputs"}
    assert c["inputs"]["alpha"] == 0.814 and c["inputs"]["engine"] == "roofline" and c["inputs"]["kv_dtype"] == "fp8"
    assert c["dips"] == [] and c["batch_bound"] == 65536 and '"batch": 1,' in out and "0.81399" not in out
    assert c["crossover_batch"] == pytest.approx(1981, rel=0.02)


def test_presets_and_seed(capsys):
    code, out, _ = run(capsys, ["presets", "--json"])
    p = json.loads(out)
    assert {m["slug"] for m in p["models"]} >= {"gpt-oss-120b", "deepseek-v3", "eagle3-gpt-oss-120b"}
    assert len(p["hardware"]) >= 21
    code, out, _ = run(capsys, ["seed"])
    assert code == 0 and "crossover at batch" in out


BAD = [
    (["--alpha", "1.3"], "alpha=1.3"),
    (["--alpha", "-0.1"], "alpha=-0.1"),
    (["--k", "-1"], "k=-1"),
    (["--batch", "0"], "batch=0"),
    (["--batch", "abc"], "'--batch'"),
    (["--accepted-length", "5"], "give exactly one of alpha, accepted_length"),
    (["--hardware", "h100-sxn"], "unknown hardware 'h100-sxn'; did you mean h100-sxm"),
    (["--target", "llama-3.1-8x"], "did you mean llama-3.1-8b"),
    (["--hardware", "a100-80gb", "--compute-dtype", "fp8"], "compute_dtype='fp8'"),
    (["--drafter", "mtp"], "a target with MTP layers"),
    (["--drafter", "bogus"], "drafter='bogus'"),
    (["--tp", "3"], "tp=3"),
    (["--kv-dtype", "fp9"], "kv_dtype='fp9'"),
]


@pytest.mark.parametrize("extra,msg", BAD)
def test_bad_input_one_line_exit_2(capsys, extra, msg):
    code, out, err = run(capsys, replacing(POINT, extra))
    assert code == 2, err
    assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_bad_files(capsys, tmp_path):
    cfg = tmp_path / "broken.json"
    cfg.write_text('{"hidden_size": 4096,')
    code, _, err = run(capsys, POINT[:2] + [str(cfg)] + POINT[3:])
    assert code == 2 and "malformed JSON" in err and "broken.json" in err
    hw = tmp_path / "gpu.toml"
    hw.write_text('name = "x"\nhbm_bytes_per_s = -2e12\nhbm_bytes = 8e10\nlink_bytes_per_s = 1e11\n'
                  '[flops_per_s]\nbf16 = 1e14\n')
    code, _, err = run(capsys, ["point", "--target", "llama-3.1-8b", "--hardware", str(hw), "--batch", "1",
                                "--alpha", "0.5", "--draft-cost", "0.1"])
    assert code == 2 and "hbm_bytes_per_s=-2000000000000.0" in err and "gpu.toml" in err
    hw.write_text("name = \n")
    code, _, err = run(capsys, ["point", "--target", "llama-3.1-8b", "--hardware", str(hw), "--batch", "1",
                                "--alpha", "0.5", "--draft-cost", "0.1"])
    assert code == 2 and "cannot read hardware file" in err and len(err.strip().splitlines()) == 1


def test_presets_imports_no_jax_and_lists_the_pytrees_numbers():
    from specjax.inputs import hardware, models

    code = ("import runpy, sys\nsys.argv = ['specjax', 'presets', '--json']\ntry:\n"
            "    runpy.run_module('specjax', run_name='__main__', alter_sys=True)\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nprint('imported jax:', sorted(m for m in sys.modules if m.split('.')[0] in "
            "('jax', 'jaxlib')), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "imported jax: []" in r.stderr, r.stderr
    p = json.loads(r.stdout)
    assert [m["slug"] for m in p["models"]] == models.preset_slugs()
    for row in p["models"]:  # the counts of the pytrees a build gives (float32 leaves, as before)
        a = models.load_architecture(row["slug"])
        m = models.eagle_head(a, a) if a.eagle_version else models.target(a)
        assert (row["total_params_b"], row["active_params_b"]) == (round(float(m.total_params) / 1e9, 3),
                                                                   round(float(m.active_params) / 1e9, 3))
    assert [h["slug"] for h in p["hardware"]] == hardware.preset_slugs()
    for row in p["hardware"]:
        h = hardware.load(row["slug"])
        assert (row["name"], row["bf16_tflops"], row["hbm_tb_s"], row["hbm_gb"], row["dtypes"]) == (
            h.name, h.flops_per_s.get("bf16", 0) / 1e12, h.hbm_bytes_per_s / 1e12, h.hbm_bytes / 1e9,
            ",".join(h.flops_per_s))


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "specjax", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "crossover" in r.stdout


def test_sensitivity_and_optimize_json(capsys):
    flags = ["--target", "gpt-oss-120b", "--hardware", "h200", "--draft-cost", "0.145", "--k", "2", "--alpha",
             "0.814", "--kv-dtype", "fp8", "--roofline", "pass", "--engine", "roofline", "--json"]
    code, out, _ = run(capsys, ["sensitivity", *flags])
    r = json.loads(out)
    assert code == 0 and r["crossover_batch"] == pytest.approx(1974, rel=0.01)
    assert set(r["elasticities"]) >= {"hbm_bytes_per_s", "flops_per_s", "alpha", "k", "context", "draft_cost",
                                      "fixed_overhead_s"}
    assert r["elasticities"]["alpha"] == pytest.approx(2.19, abs=0.02)
    assert list(r["elasticities"])[0] in ("flops_per_s", "hbm_bytes_per_s", "flops_efficiency", "hbm_efficiency")
    code, out, _ = run(capsys, ["optimize", *flags, "--batch", "1", "--batch", "256", "--batch", "4096"])
    o = json.loads(out)
    assert code == 0 and [row["batch"] for row in o["k_star_by_batch"]] == [1.0, 256.0, 4096.0]
    assert all(set(row) >= {"batch", "k_star", "speedup", "status"} for row in o["k_star_by_batch"])
    assert o["k_star_by_batch"][1]["k_star"] >= 1 and o["k_star_by_batch"][1]["status"] == "ok"
    # batch 4096 does not fit with the drafter on one H200: no k* there, the status says why
    assert o["k_star_by_batch"][2]["k_star"] is None and o["k_star_by_batch"][2]["status"] != "ok"
    assert o["switch_off_batch"] == pytest.approx(2754, rel=0.01)
    assert o["pays_up_to_bound"] == "memory" and o["pays_up_to"] == o["max_batch_sd"] < o["switch_off_batch"]
    code, out, _ = run(capsys, ["sensitivity", *flags[:-1]])
    assert code == 0 and "switch-off batch B_off = 1974" in out and "elasticity" in out
    # the JSON call's batches: the same compiled search (one batch alone is another shape, another compile)
    code, out, _ = run(capsys, ["optimize", *flags[:-1], "--batch", "1", "--batch", "256", "--batch", "4096"])
    assert code == 0 and "the largest batch that fits in memory with the drafter" in out


def test_engine_profiles_on_the_command_line(capsys):
    """--engine roofline is the pure model (step time = k drafts + verify); the default engine adds its
    overheads (the step costs more than its parts); a user's engine TOML works like a preset."""
    base = [a for a in POINT if a not in ("--engine", "roofline")] + ["--json"]
    code, out, _ = run(capsys, base)
    default = json.loads(out)
    code_r, out_r, _ = run(capsys, base + ["--engine", "roofline"])
    pure = json.loads(out_r)
    assert code == code_r == 0
    assert default["t_target_s"] > pure["t_target_s"] and default["t_sd_step_s"] >= pure["t_sd_step_s"]
    code, _, err = run(capsys, base + ["--engine", "vllm-9"])
    assert code == 2 and "unknown engine 'vllm-9'" in err


def test_user_engine_file(capsys, tmp_path):
    eng = tmp_path / "mine.toml"
    eng.write_text('name = "mine"\nfixed_overhead_s = 1e-3\nstep_overhead_s = 2e-3\n')
    args = [a for a in POINT if a not in ("--engine", "roofline")] + ["--json"]
    _, out_r, _ = run(capsys, args + ["--engine", "roofline"])
    code, out, _ = run(capsys, args + ["--engine", str(eng)])
    r, pure = json.loads(out), json.loads(out_r)
    assert code == 0 and r["t_target_s"] == pytest.approx(pure["t_target_s"] + 1e-3, rel=1e-5)
    assert r["t_sd_step_s"] == pytest.approx(3 * r["t_draft_s"] + r["t_verify_s"] + 2e-3, rel=1e-5)
    eng.write_text('name = "bad"\nstep_overhead_s = -1\n')
    code, _, err = run(capsys, args + ["--engine", str(eng)])
    assert code == 2 and "step_overhead_s=-1" in err


GPT_OSS_EAGLE = ["crossover", "--target", "gpt-oss-120b", "--hardware", "h200", "--drafter", "eagle", "--draft",
                 "eagle3-gpt-oss-120b", "--k", "3", "--alpha", "0.7", "--kv-dtype", "fp8"]


def test_crossover_reports_the_switch_off_batch_not_the_first_dip(capsys):
    """The issue's command: on the pure roofline S dips below 1 at batch 1.27 and recovers (2x by batch
    64); speculation stops paying for good near 1,300. With the default engine profile the overheads
    fill the dip and the one crossing is B_off."""
    code, out, _ = run(capsys, GPT_OSS_EAGLE + ["--engine", "roofline", "--json"])
    c = json.loads(out)
    assert code == 0 and c["status"] == "stops_paying"
    assert c["crossover_batch"] == pytest.approx(1343, rel=0.01)
    assert c["first_crossing_batch"] == pytest.approx(1.267, rel=0.01)
    assert len(c["dips"]) == 1 and c["dips"][0][0] == pytest.approx(1.267, rel=0.01) and 5 < c["dips"][0][1] < 12
    assert c["grid_points"] >= 96 and c["batch_bound"] == 65536
    code, out, _ = run(capsys, GPT_OSS_EAGLE)
    assert code == 0 and "stops paying at batch B_off = 1042" in out and "searched [1, 65536]" in out
    code, out, _ = run(capsys, GPT_OSS_EAGLE + ["--json"])
    c = json.loads(out)
    assert c["inputs"]["engine"] == "vllm" and c["dips"] == [] and c["first_crossing_batch"] == c["crossover_batch"]


def test_hurts_at_small_batch_is_not_never_helps(capsys):
    code, out, _ = run(capsys, ["crossover", "--target", "qwen3-235b-a22b", "--hardware", "h200", "--drafter", "model",
                                "--draft", "qwen3-8b", "--tp", "4", "--alpha", "0.814", "--engine", "roofline",
                                "--json"])
    c = json.loads(out)
    assert code == 0 and c["status"] == "hurts_at_small_batch" and c["speedup_at_batch_1"] < 1
    lo, hi = c["pays_between"]
    assert lo < 3.0 and hi == c["crossover_batch"] > 100 and c["dips"][0][0] == 1


def test_sensitivity_always_prints_numbers(capsys):
    """The README example prints elasticities of B_off; a curve with no switch-off batch gets the
    speedup's elasticities at --batch, and says so (never 'undefined')."""
    code, out, _ = run(capsys, ["sensitivity", "--target", "gpt-oss-120b", "--hardware", "h200", "--draft-cost",
                                "0.145", "--alpha", "0.814", "--kv-dtype", "fp8"])
    assert code == 0 and "elasticities of the switch-off batch" in out and "undefined" not in out
    assert len([ln for ln in out.splitlines() if ln.startswith("alpha ")]) == 1
    args = ["sensitivity", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.0",
            "--batch", "8", "--json"]
    code, out, _ = run(capsys, args)
    r = json.loads(out)
    assert code == 0 and r["status"] == "never_helps" and r["of"] == "speedup" and r["at_batch"] == 8
    assert all(v is not None for v in r["elasticities"].values()) and r["elasticities"]["alpha"] == 0.0
    assert r["elasticities"]["hbm_bytes_per_s"] != 0
    code, out, _ = run(capsys, args[:-1])
    assert code == 0 and "elasticities of the speedup at batch 8" in out


def test_repeated_flags(capsys):
    """point takes a list of batches (a table); any other single-valued option given twice is refused."""
    base = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.7"]
    code, out, _ = run(capsys, base + ["--batch", "1", "--batch", "32", "--batch", "128", "--json"])
    r = json.loads(out)
    assert code == 0 and [p["batch"] for p in r["points"]] == [1, 32, 128]
    single = {b: json.loads(run(capsys, base + ["--batch", str(b), "--json"])[1])["speedup"] for b in (1, 32, 128)}
    assert [p["speedup"] for p in r["points"]] == [single[1], single[32], single[128]]
    code, out, _ = run(capsys, base + ["--batch", "1", "--batch", "32"])
    assert code == 0 and len([ln for ln in out.splitlines() if ln.split()[:1] in (["1"], ["32"])]) == 2
    code, out, err = run(capsys, base + ["--batch", "1", "--alpha", "0.8"])
    assert code == 2 and "--alpha given 2 times" in err and out == ""
    code, _, err = run(capsys, base + ["--batch", "1", "--k=3", "--k", "4"])
    assert code == 2 and "--k given 2 times" in err


def test_json_numbers_are_short_and_inputs_are_echoed(capsys):
    code, out, _ = run(capsys, POINT + ["--json"])
    r = json.loads(out)
    assert '"alpha": 0.7,' in out and "0.699999" not in out and '"batch": 16,' in out
    assert r["inputs"] == {"target": "llama-3.1-8b", "drafter": "eagle", "draft": "eagle3-llama-3.1-8b",
                           "draft_cost": None, "hardware": "h100-sxm", "engine": "roofline", "weight_dtype": "bf16",
                           "expert_dtype": "bf16", "kv_dtype": "bf16", "compute_dtype": "bf16", "k": 3, "alpha": 0.7,
                           "accepted_length": None, "batch": 16, "context": 2048, "tp": 1, "ep": 1, "dp_attention": 1,
                           "draft_tp": None, "gpus": 1, "expert_imbalance": 1, "roofline": "operator",
                           "memory_fraction": 0.9, "expert_locality": 0, "acceptance_vector": None,
                           "position_rates": None, "rates": None, "tree_topk": None, "tree_tokens": None,
                           "draft_kv_budget": None}


@pytest.mark.parametrize("value", ["inf", "1e308", "1", "nan"])
def test_batch_max_out_of_range_is_refused(capsys, value):
    """An infinite or float-overflowing search bound used to give null speedups with status ok."""
    for cmd in ("crossover", "sensitivity", "optimize"):
        code, out, err = run(capsys, [cmd, "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram",
                                      "--alpha", "0.7", "--batch-max", value])
        assert code == 2 and f"batch_max={float(value)!r}" in err and out == "" and len(err.splitlines()) == 1
