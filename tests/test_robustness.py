"""Issue 28's defect classes, one test (or a few) per class at its mechanism: one input-application path
(engine terms from engine files only; a tree tau used as given or refused), one non-finite policy for
every writer, serving paths where a prompt does not fit, option handling, and the first hour of a new user
(calibration that cannot identify, misread Hugging Face configs, defaults)."""

import dataclasses
import json
import pathlib

import pytest

from specjax import api, catalogue
from specjax.errors import SpecError
from specjax.cli import main
from specjax.inputs import hardware
from specjax.inputs.scenario import Scenario

SILICON = ('name = "x"\nhbm_bytes_per_s = 3.35e12\nhbm_bytes = 8e10\nlink_bytes_per_s = 4.5e11\n'
           "link_latency_s = 5e-6\n[flops_per_s]\nbf16 = 989e12\n")


def run(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def one_line_error(capsys, args, text):
    code, _, err = run(capsys, args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("specjax: error: ") and text in lines[0], lines[0]
    return lines[0]


# --- 1. one input-application path -------------------------------------------------------------------------

@pytest.mark.parametrize("key", list(catalogue.ENGINE))
def test_engine_terms_in_a_hardware_file_are_refused(key, tmp_path):
    """Every engine row of the catalogue: a hardware file carrying it is refused with a line that names the
    key and says where it belongs (the CLI's engine profile overwrote it, the API with engine=None applied it:
    one label, two answers)."""
    p = tmp_path / "gpu.toml"
    value = catalogue.INPUTS[key].start if catalogue.INPUTS[key].start is not None else 0.5
    p.write_text(SILICON.replace("[flops", f"{key} = {value}\n[flops"))
    with pytest.raises(Exception) as e:
        hardware.load(str(p))
    msg = str(e.value)
    assert f"{key} is an engine term" in msg and "engine file" in msg and str(p) in msg and "\n" not in msg


def test_api_and_cli_apply_engine_terms_the_same_way(capsys, tmp_path):
    """The same hardware file and engine file give the same numbers from the CLI and the Python API, and
    `Scenario(engine=None)` is the default engine (vllm), the CLI's default."""
    hw, eng = tmp_path / "gpu.toml", tmp_path / "eng.toml"
    hw.write_text(SILICON)
    eng.write_text('name = "e"\nflops_efficiency = 0.5\nfixed_overhead_s = 2e-3\n')
    args = ["point", "--target", "llama-3.1-8b", "--hardware", str(hw), "--alpha", "0.7", "--batch", "8",
            "--draft-cost", "0.05", "--json"]
    for engine in (str(eng), "roofline", None):
        code, out, _ = run(capsys, args + (["--engine", engine] if engine else []))
        cli = json.loads(out)
        sc = Scenario("llama-3.1-8b", str(hw), alpha=0.7, batch=8, draft_cost=0.05, engine=engine)
        py = api.point(sc)
        assert code == 0 and cli["inputs"]["engine"] == sc.engine == (engine or "vllm")
        for key in ("speedup", "t_target_s", "t_sd_step_s"):
            assert cli[key] == py[key], (engine, key)
    pure = api.point(Scenario("llama-3.1-8b", str(hw), alpha=0.7, batch=8, draft_cost=0.05, engine="roofline"))
    mine = api.point(Scenario("llama-3.1-8b", str(hw), alpha=0.7, batch=8, draft_cost=0.05, engine=str(eng)))
    assert mine["t_target_s"] == pytest.approx(pure["t_target_s"] + 2e-3, rel=1e-5)  # 2 ms a pass (memory-bound)
    vllm = api.point(Scenario("llama-3.1-8b", str(hw), alpha=0.7, batch=8, draft_cost=0.05, engine="vllm"))
    none = api.point(Scenario("llama-3.1-8b", str(hw), alpha=0.7, batch=8, draft_cost=0.05, engine=None))
    assert none == vllm


TREE = ["point", "--target", "qwen3-8b", "--drafter", "eagle", "--draft", "eagle3-qwen3-8b", "--hardware",
        "h100-sxm", "--k", "3", "--tree-topk", "2", "--tree-tokens", "6", "--batch", "1"]


def test_a_tree_tau_is_used_as_given_or_refused(capsys, tmp_path):
    """Topk 2, 6 tokens, depth 3 keeps 2, 2, 1 candidates: m = 2, 1, 1/2, so at alpha = 1 the estimate
    reaches tau = 1 + 1 + 1 + 1/2 = 3.5. A measured 3.5 is used as given; 3.7 was clipped to 3.5 by the
    bisection (alpha = 1) and is now refused with the ceiling, and a CSV row of it is unsupported."""
    code, out, _ = run(capsys, TREE + ["--accepted-length", "3.5", "--json"])
    assert code == 0 and json.loads(out)["tokens_per_step"] == pytest.approx(3.5, rel=1e-5)
    code, out, _ = run(capsys, TREE + ["--accepted-length", "2.9", "--json"])
    assert code == 0 and json.loads(out)["tokens_per_step"] == pytest.approx(2.9, rel=1e-5)
    one_line_error(capsys, TREE + ["--accepted-length", "3.7"], "accepted_length=3.7; expected 1 <= tau <= 3.5")
    from specjax.inputs import measured

    head = ("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,weight_dtype,"
            "measured_speedup,metric,approximate,source_url,tree_topk,tree_tokens\n")
    row = "A,qwen3-8b,eagle,eagle3-qwen3-8b,h100-sxm,1,1,3,,{tau},180,bf16,1.6,throughput,no,u,2,6\n"
    p = tmp_path / "m.csv"
    p.write_text(head + row.format(tau=3.4) + row.format(tau=3.7))
    rows = measured.load(p)
    assert rows[0].unsupported is None
    assert "column accepted_length: 3.7; expected 1 <= tau <= 3.5" in rows[1].unsupported


# --- 2. one non-finite policy for every writer -------------------------------------------------------------

def test_every_writer_writes_non_finite_numbers_as_null(tmp_path, capsys):
    """Parquet, CSV, written JSON and printed JSON share `outputs.finite`: NaN and +-inf become null (an empty
    CSV cell), in nested values too; nothing else changes."""
    import math

    import numpy as np
    import polars as pl

    from specjax.cli.app import print_json
    from specjax.outputs import io

    df = pl.DataFrame({"x": np.array([1.5, np.inf, -np.inf, np.nan], np.float32), "n": [1, 2, 3, 4],
                       "status": ["ok", "sd_saturated", "sd_saturated", "invalid_input"]})
    io.write_parquet_atomic(df, tmp_path / "a.parquet", {})
    back = pl.read_parquet(tmp_path / "a.parquet")
    assert back["x"].to_list() == [1.5, None, None, None] and back["n"].to_list() == [1, 2, 3, 4]
    io.write_csv_atomic(df, tmp_path / "a.csv")
    assert (tmp_path / "a.csv").read_text().splitlines()[1:3] == ["1.5,1,ok", ",2,sd_saturated"]
    obj = {"a": math.inf, "b": [float("nan"), 2.0], "c": {"d": np.float32(np.inf), "e": np.float64(0.25)}}
    io.write_json_atomic(tmp_path / "a.json", obj)
    text = (tmp_path / "a.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [None, 2.0], "c": {"d": None, "e": 0.25}}
    print_json(obj)
    assert json.loads(capsys.readouterr().out) == {"a": None, "b": [None, 2], "c": {"d": None, "e": 0.25}}


def test_a_serve_sweep_writes_null_ttft_with_the_status_that_says_why(tmp_path, capsys):
    """At 30 and 100 requests/s neither side of Llama-3-70B on 4 x H100 keeps up (both cap at 256
    sequences): TTFT and E2E grow without bound. They were +inf in Parquet; now null, status
    `both_saturated`; the sustainable 1 request/s row keeps its numbers."""
    import polars as pl

    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\nengine = "vllm"\nhardware = ["h100-sxm"]\n[[pairs]]\ntarget = "llama-3-70b"\n'
                    'drafter = "model"\ndraft = "qwama-0.5b"\ntp = 4\ndraft_tp = 1\nlabel = "p"\n[fixed]\n'
                    "input_len = 220\noutput_len = 200\nmax_num_seqs = 256\nalpha = 0.6\nk = 3\n[axes]\n"
                    'qps = [1.0, 30.0, 100.0]\n[reduce]\nkind = "serve"\n')
    code, _, err = run(capsys, ["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert code == 0, err
    df = pl.read_parquet(tmp_path / "out" / "**" / "*.parquet").sort("qps_req_s")
    floats = [c for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)]
    assert not df.select(pl.any_horizontal(pl.col(floats).is_infinite() | pl.col(floats).is_nan())).to_series().any()
    assert df["status"].cast(str).to_list() == ["ok", "both_saturated", "both_saturated"]
    assert df["ttft_sd_s"].null_count() == 2 and df["e2e_base_s"].null_count() == 2
    assert 0 < df["ttft_sd_s"][0] < 1 and df["tpot_sd_s"].null_count() == 0


# --- 3. serving paths where one prompt does not fit ---------------------------------------------------------

LONG = ["--target", "llama-3.1-8b", "--hardware", "rtx-3090", "--drafter", "eagle", "--draft", "eagle3-llama-3.1-8b",
        "--alpha", "0.7", "--k", "3", "--input-len", "120000", "--output-len", "128"]


def test_serve_says_does_not_fit_when_one_prompt_does_not(capsys):
    """A 120k-token prompt's KV cache (128 KiB a token in bf16: 15.7 GB) does not fit a 24 GB RTX 3090 beside
    Llama-3.1-8B's 16 GB of weights: `serve` crashed formatting a None ratio and called the curve
    `never_helps`. Now: exit 0,
    curve status `sd_does_not_fit`, per-rate status `model_does_not_fit` (and no default rates, which would all
    be 0 req/s: `test_plot_serving_marks_a_scenario_that_does_not_fit`)."""
    code, out, err = run(capsys, ["serve", *LONG, "--qps", "1", "--json"])
    r = json.loads(out)
    assert code == 0 and r["curve_status"] == "sd_does_not_fit" and r["max_qps_sd"] == 0, err
    assert [p["status"] for p in r["points"]] == ["model_does_not_fit"] and r["points"][0]["tpot_sd_s"] is None
    code, out, err = run(capsys, ["serve", *LONG, "--qps", "1"])
    assert code == 0 and "Traceback" not in err and "never" not in out
    assert "does not fit: one request" in out and "(status sd_does_not_fit; TPOT ratio - as the rate -> 0)" in out
    assert out.splitlines()[1].split()[-1] == "model_does_not_fit"


def test_a_curve_that_does_not_fit_says_so():
    """The rate and concurrency curves share `crossover.unless_unfit`: a speculative batch cap below one
    sequence is `sd_does_not_fit`, NaN `invalid_input`, otherwise the curve's own status stands."""
    import jax.numpy as jnp

    from specjax.cost.status import Curve
    from specjax.search.crossover import unless_unfit

    got = unless_unfit(jnp.asarray([2, 2, 0, 1], jnp.int8), jnp.asarray([0.0, jnp.nan, 1.0, 300.0]))
    assert [Curve(int(c)).label for c in got] == ["sd_does_not_fit", "invalid_input", "stops_paying",
                                                  "helps_throughout"]


def test_plot_serving_marks_a_scenario_that_does_not_fit():
    """`plot serving` crashed on a scenario without rows; now it is a mark with its status, and a figure of
    nothing is refused in one line."""
    from specjax.errors import SpecError
    from specjax.outputs import curves

    fits = Scenario("llama-3.1-8b", "h100-sxm", drafter="ratio", draft_cost=0.05, alpha=0.7, k=3, input_len=1000,
                    output_len=128)
    long = Scenario("llama-3.1-8b", "rtx-3090", drafter="ratio", draft_cost=0.05, alpha=0.7, k=3,
                    input_len=120_000, output_len=128)
    df, marks = curves.serving_grid({"fits": fits, "long": long}, points=5)
    assert set(df["label"]) == {"fits"} and df.height == 5
    assert marks["long"]["curve_status"] == "sd_does_not_fit" and marks["fits"]["curve_status"] != "sd_does_not_fit"
    with pytest.raises(SpecError, match="nothing to plot: long: does not fit: one request"):
        curves.serving_grid({"long": long}, points=5)


def test_a_rate_row_that_does_not_fit_is_skipped_not_scored(tmp_path, capsys):
    """Line 4's 120k-token prompt does not fit a 24 GB GPU beside the weights: it was scored with a null
    prediction, which nulled the file's median APE. It is now unsupported with its status; the other two
    rows score as before."""
    head = ("series,target,drafter,draft,hardware,tp,k,acceptance_rate,accepted_length,weight_dtype,metric,"
            "approximate,source_url,engine,qps,input_len,output_len,measured_ratio\n")
    row = "{s},llama-3.1-8b,eagle,eagle3-llama-3.1-8b,{h},1,3,0.7,,bf16,tpot,no,u,vllm,{q},{n},128,{m}\n"
    p = tmp_path / "q.csv"
    p.write_text(head + row.format(s="A", h="h100-sxm", q=1, n=1000, m=1.5)
                 + row.format(s="A", h="h100-sxm", q=2, n=1000, m=1.4)
                 + row.format(s="B", h="rtx-3090", q=1, n=120_000, m=1.5))
    code, out, _ = run(capsys, ["validate", str(p), "--json"])
    r = json.loads(out)
    assert code == 0 and r["rows_scored"] == 2 and r["rows_unsupported"] == 1
    assert r["unsupported_reasons"] == ["not predicted: status model_does_not_fit (the model does not fit with one "
                                        "sequence: its weights, or them and one request's KV)"]
    assert r["median_ape"] == pytest.approx(r["groups"]["source"]["u"]["median_ape"]) and 0 < r["median_ape"] < 1
    assert r["level"]["rows_scored"] == 1 and r["shape"]["rows_scored"] == 1


def test_every_status_has_its_share_in_a_summary(tmp_path, capsys):
    """A summary's shares are every status of the reduction's type (declared once, in `cost.status`): a
    serve sweep where one prompt does not fit reports `share_model_does_not_fit` (it had only the four
    saturation shares, so those rows were counted nowhere)."""
    from specjax.outputs import summary
    from specjax.search import reductions

    for name in ("crossover", "serve", "switch_off_qps", "serve_concurrency"):
        red = reductions.get(name)
        assert red.share_of == tuple(red.status_type), name
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\nengine = "vllm"\nhardware = ["h100-sxm", "rtx-3090"]\n[[pairs]]\n'
                    'target = "llama-3.1-8b"\ndrafter = "eagle"\ndraft = "eagle3-llama-3.1-8b"\nlabel = "p"\n'
                    "[fixed]\ninput_len = 120000\noutput_len = 128\nalpha = 0.7\nk = 3\n[axes]\n"
                    'qps = [0.01, 0.02]\n[reduce]\nkind = "serve"\n')
    code, _, err = run(capsys, ["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 0, err
    df = summary.summarize(tmp_path / "out")
    shares = [c for c in df.columns if c.startswith("share_")]
    assert shares == [f"share_{s.label}" for s in reductions.get("serve").status_type]
    rtx = df.filter(df["hardware"] == "rtx-3090")
    assert rtx["share_model_does_not_fit"][0] == 1.0
    assert (df.select(shares).sum_horizontal() == 1.0).all()


def test_a_draft_model_of_another_vocabulary_is_refused(capsys, tmp_path):
    """Only EAGLE heads were checked: Mixtral-8x22B (32,768 tokens) drafted by Mixtral-8x7B (32,000) was costed.
    vLLM asserts equal vocabulary sizes and SGLang's STANDALONE mode refuses differing vocabularies, so a
    separate draft model of another vocabulary is refused in one line; the same draft with the target's
    vocab_size runs."""
    args = ["crossover", "--target", "mixtral-8x22b", "--hardware", "h200", "--drafter", "model", "--draft",
            "{d}", "--tp", "4", "--alpha", "0.8", "--json"]
    one_line_error(capsys, [a.replace("{d}", "mixtral-8x7b") for a in args],
                   "expected a draft model with vocab_size 32768 like the target mixtral-8x22b (this one has 32000: "
                   "another tokenizer")
    from specjax.inputs import models

    cfg = json.loads((models.PRESET_DIR / "mixtral-8x7b.json").read_text())
    p = tmp_path / "draft.json"
    p.write_text(json.dumps({**cfg, "vocab_size": 32768}))
    code, out, err = run(capsys, [a.replace("{d}", str(p)) for a in args])
    assert code == 0 and json.loads(out)["status"] in ("hurts_at_small_batch", "stops_paying"), err


# --- 4. option handling: one parsing path ----------------------------------------------------------------

POINT = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.7"]


@pytest.fixture
def no_cache_setup(monkeypatch):
    """The global cache options without touching this process's JAX cache configuration: the directories
    `enable_cache` was given."""
    from specjax import runtime

    seen = []
    monkeypatch.setattr(runtime, "enable_cache", lambda path=None: seen.append(path))
    return seen


@pytest.mark.parametrize("args, text", [
    (["--cache-dir", "{d}", *POINT, "--alpha", "0.5"], "--alpha given 2 times; expected once (point takes"),
    (["--cache-dir={d}", *POINT, "--k=3", "--k", "4"], "--k given 2 times"),
    (["--no-cache", "--profile", *POINT, "--json", "--json"], "--json given 2 times"),
    (["--cache-dir", "{d}", "--cache-dir", "{d}", *POINT], "--cache-dir given 2 times; expected once (a global"),
    (["--profile", "--profile", *POINT], "--profile given 2 times"),
    (["--cache-dir", "", *POINT], "--cache-dir=''; expected a directory (--no-cache turns the cache off)"),
    (["--cache-dir", "  ", *POINT], "--cache-dir='  '; expected a directory"),
    (["--cache-dir", "{d}", "--no-cache", *POINT], "and --no-cache contradict each other"),
])
def test_options_are_parsed_once_wherever_they_stand(args, text, capsys, tmp_path, no_cache_setup):
    """The repeated-option check runs inside click's parser (every command and the global options), so a
    global option before the command no longer hides a repeated one; an empty --cache-dir (which wrote
    the cache into the working directory) and --cache-dir beside --no-cache are refused before any cache is
    set up."""
    args = [a.replace("{d}", str(tmp_path / "c")) for a in args]
    code, _, err = run(capsys, args)
    lines = err.strip().splitlines()  # with --profile the profile lines follow the error
    assert code == 2 and "Traceback" not in err and (len(lines) == 1 or "--profile" in args), err
    assert lines[0].startswith("specjax: error: ") and text in lines[0], lines[0]
    if "" in args or "  " in args or "--no-cache" in args:
        assert no_cache_setup == []  # refused before any cache directory was set up
    assert not (tmp_path / "c").exists()


def test_a_repeated_list_option_still_repeats_after_a_global_option(capsys, no_cache_setup, tmp_path):
    code, out, _ = run(capsys, ["--cache-dir", str(tmp_path), *POINT, "--batch", "1", "--batch", "32", "--json"])
    assert code == 0 and [p["batch"] for p in json.loads(out)["points"]] == [1, 32]
    assert [str(p) for p in no_cache_setup] == [str(tmp_path)]


def test_profile_lines_follow_the_error(capsys):
    """`--profile` with bad input: the error is the first line on stderr, the profile lines after it."""
    code, _, err = run(capsys, ["--profile", "point", "--target", "llama-3.1-8bx", "--hardware", "h100-sxm",
                                "--drafter", "ngram", "--alpha", "0.7"])
    lines = err.strip().splitlines()
    assert code == 2 and lines[0].startswith("specjax: error: unknown model 'llama-3.1-8bx'"), err
    assert lines[1:] and all(ln.startswith("profile: ") for ln in lines[1:]), err
    code, _, err = run(capsys, ["--profile", *POINT, "--json"])
    assert code == 0 and err.strip().splitlines()[0].startswith("profile: ")


# --- 5. the older catalogue ----------------------------------------------------------------------------------

def _deep(n):
    return "[" * n + "]" * n


@pytest.mark.parametrize("kind, text, expect", [
    ("config", '{"a": ' + _deep(100_000) + "}", "JSON nested too deep"),
    ("config", '{"num_hidden_layers": ' + "9" * 5000 + "}", "an integer of 5,000 digits; expected a count or size"),
    ("config", '{"num_hidden_layers": NaN}', "NaN is not a JSON number"),
    ("config", '{"num_hidden_layers": -Infinity}', "-Infinity is not a JSON number"),
    ("hardware", SILICON + "x = " + _deep(100_000) + "\n", "TOML nested too deep"),
    ("hardware", SILICON.replace("8e10", "9" * 5000), "an integer of more than 300 digits"),
    ("hardware", SILICON.replace("8e10", "9" * 400), "an integer of more than 300 digits"),
    ("engine", 'name = "e"\nfixed_overhead_s = ' + "9" * 5000 + "\n", "an integer of more than 300 digits"),
    ("spec", "x = " + _deep(100_000) + "\n", "TOML nested too deep"),
    ("spec", "[fixed]\nbatch = " + "9" * 5000 + "\n", "an integer of more than 300 digits"),
])
def test_configs_and_tomls_are_parsed_by_one_bounded_reader(kind, text, expect, tmp_path, capsys):
    """config.json, hardware, engine and sweep TOML go through `errors.parse_json` / `parse_toml`: nesting
    beyond the recursion limit, integers of thousands of digits (Python refuses over 4,300; a float is
    infinite over 308) and NaN/Infinity literals are one line naming the file, never a traceback."""
    p = tmp_path / ("in.json" if kind == "config" else "in.toml")
    p.write_text(text)
    args = {"config": ["point", "--target", str(p), "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.7"],
            "hardware": ["point", "--target", "llama-3.1-8b", "--hardware", str(p), "--drafter", "ngram",
                         "--alpha", "0.7"],
            "engine": [*POINT, "--engine", str(p)],
            "spec": ["sweep", str(p), "--out", str(tmp_path / "out")]}[kind]
    line = one_line_error(capsys, args, expect)
    assert str(p) in line or p.name in line, line
    assert not (tmp_path / "out").exists()


def test_optimize_ignore_memory_reports_k_star_where_the_target_does_not_fit(capsys):
    """--ignore-memory is pure roofline for optimize as for point: k* and its speedup at every batch (the
    status still says the weights do not fit), and memory bounds nothing."""
    args = ["optimize", "--target", "llama-3.1-70b", "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha",
            "0.7", "--batch", "1", "--batch", "64", "--json"]
    one_line_error(capsys, args, "do not fit")
    code, out, _ = run(capsys, args + ["--ignore-memory"])
    r = json.loads(out)
    assert code == 0 and [row["status"] for row in r["k_star_by_batch"]] == ["model_does_not_fit"] * 2
    assert all(row["k_star"] >= 1 and row["speedup"] > 1 for row in r["k_star_by_batch"]), r
    sc = Scenario(target="llama-3.1-70b", hardware="h100-sxm", drafter="ngram", alpha=0.7, batch=64.0)
    best = max(api.point(dataclasses.replace(sc, k=k))["speedup"] for k in range(1, 17))
    assert r["k_star_by_batch"][1]["speedup"] == pytest.approx(best, rel=1e-4)
    assert r["pays_up_to_bound"] in ("switch_off", "search_bound") and r["max_batch_sd"] == 0


def test_a_full_disk_before_the_sweep_lock_is_one_line(tmp_path, monkeypatch, capsys):
    """The lock's own write hitting ENOSPC (a full disk before the sweep starts) was a traceback; now one
    line, and no lock file or new directory is left (the real tmpfs case: `test_faults.py::...[sweep-lock]`)."""
    import errno
    import os
    import socket

    from specjax.outputs import io

    real = os.write

    def full(fd, data):
        if bytes(data).startswith(socket.gethostname().encode()):  # the lock's "host pid"
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(io.os, "write", full)
    spec = pathlib.Path(__file__).parent / "data" / "tiny.toml"
    one_line_error(capsys, ["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet"],
                   f"cannot write to output directory {str(tmp_path / 'out')!r}: No space left on device")
    assert not (tmp_path / "out").exists()  # the directory this run made is removed again


def _speedup_frame(alphas, ks, batches=(1.0, 8.0, 64.0, 512.0)):
    import polars as pl

    rows = [dict(alpha=a, k_tokens=float(k), batch_seqs=b, speedup=(1 + a * k) / (1 + b / 100) ** 0.5, status="ok")
            for a in alphas for k in ks for b in batches]
    return pl.DataFrame(rows)


def test_a_speedup_figure_has_at_most_8_lines_a_panel_and_says_what_it_left_out(capsys):
    """48 series (6 alphas x 8 k) were 48 lines and a 48-entry legend in one axes: now 6 panels by alpha of
    8 lines; 160 series (20 alphas x 8 k) are 8 panels by k of 8 evenly spaced alphas (first and last kept),
    the figure and the table (`shown`) saying which."""
    from specjax.outputs import plots

    alphas6, alphas20 = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9], [round(0.3 + i * 0.65 / 19, 4) for i in range(20)]
    df = _speedup_frame(alphas6, range(1, 9))
    assert plots.facets(df, [], ["alpha", "k_tokens"]) == (["alpha"], {}, "")
    fig, table = plots.speedup_figure(df)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 6 and all(len(ax.get_legend().get_texts()) == 8 for ax in axes)
    assert table.height == 48 and table["shown"].all()
    df = _speedup_frame(alphas20, range(1, 9))
    panel, kept, note = plots.facets(df, [], ["alpha", "k_tokens"])
    assert panel == ["k_tokens"] and len(kept["alpha"]) == 8 and kept["alpha"][0] == 0.3 and kept["alpha"][-1] == 0.95
    assert note.startswith("alpha: 8 of 20 values shown (0.3, ")
    fig, table = plots.speedup_figure(df)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 8 and max(len(ax.get_legend().get_texts()) for ax in axes) <= plots.MAX_LINES
    assert table.height == 160 and table["shown"].sum() == 64 and note in fig.texts[-1].get_text()
    assert table.filter(~table["shown"])["series"].str.starts_with("k=").all()  # named as the shown rows are


# --- 5b. what a hostile first user found (RELIABILITY.md: the catalogue) -----------------------------------

def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, capsys):
    """`validate rows.csv --out rows.csv` replaced the measurements with the predictions (exit 0): every
    command with --out and input files (validate, calibrate, ingest) refuses an --out that is one of its
    inputs, by file identity (a link to it too), and the input is untouched."""
    import os
    import shutil

    root = pathlib.Path(__file__).parents[1]
    rows = tmp_path / "rows.csv"
    shutil.copy(root / "data" / "measured" / "public.csv", rows)
    before = rows.read_bytes()
    os.symlink(rows, tmp_path / "link.csv")
    log = tmp_path / "vllm.csv"
    shutil.copy(root / "tests" / "data" / "engines" / "vllm.log", log)
    for args, out in ((["validate", str(rows)], rows), (["validate", str(rows)], tmp_path / "link.csv"),
                      (["ingest", str(log)], log)):
        one_line_error(capsys, [*args, "--out", str(out)], f"out={str(out)!r} is an input of this command")
    toml = tmp_path / "rows.toml"
    shutil.copy(rows, toml)
    one_line_error(capsys, ["calibrate", str(toml), "--out", str(toml)], "is an input of this command")
    assert rows.read_bytes() == before


@pytest.mark.parametrize("args, text", [
    (["point", *POINT[1:7], "--acceptance-vector", "0.9,abc"],
     "acceptance_vector='0.9,abc'; expected comma-separated rates such as 0.8,0.6,0.5"),
    (["sweep", "{spec}", "--out", "{file}"], "is a file, not a directory; a sweep writes a directory of results"),
    (["validate", "{dup}"], "column 'series' given twice (columns 1 and 19); expected each once"),
    (["sweep", "{spec}", "--out", "{d}/o", "--coordinator", "localhost:1234"],
     "coordinator='localhost:1234' is for a multi-process run; give --num-processes N (> 1)"),
    (["sweep", "{spec}", "--out", "{d}/o", "--resume", "--overwrite"], "--resume and --overwrite contradict"),
    (["report", "{spec}", "--out", "{d}/r", "--resume", "--overwrite"], "--resume and --overwrite contradict"),
    (["plot", "crossover-map", "--from", "{d}", "--x", "alpha", "--y", "alpha", "--out", "{d}/o"],
     "x='alpha' and y='alpha': expected two different columns"),
    (["ingest", "{log}", "--target", "llama-3.1-8b", "--tp", "2", "--out", "{d}/o.csv"],
     "--target, --tp: for benchmark results only; vllm-log gives acceptance per batch"),
    (["ingest", "{bench}", "{bench2}", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "ratio",
      "--out", "{d}/o.csv"], "drafter='ratio'; expected one of model, eagle, parallel, mtp, self, ngram"),
    (["advise", *POINT[1:9], "--draft-id", ""], "draft_id=''; expected the draft's model id"),
    (["validate", "{comma}"], "column 19 of the header has no name (a trailing comma?)"),
    (["validate", "{rows}", "{rows2}"], "given twice (also as"),
    (["ingest", "{log}", "{log}", "--out", "{d}/o.csv"], "given twice (also as"),
    (["ingest", "{bench}", "{bench2}", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle",
      "--draft", "eagle3-llama-3.1-8b", "--k", "5", "--out", "{d}/o.csv"], "the result's draft length is 3, not --k 5"),
    # hostile review 15: an empty --out wrote into the working directory (sweep, report), dropped the table
    # (validate: exit 0) or was a traceback (plot); --devices 0 meant "all"; --trees searched draft trees of
    # a drafter that runs no model (point refuses one); a draft larger than the target was evaluated
    (["plot", "roofline", *POINT[1:7], "--out", ""], "out=''; expected a file path without suffix"),
    (["plot", "roofline", *POINT[1:7], "--out", "{d}/"], "expected a file path without suffix"),
    (["validate", "{rows}", "--out", ""], "out=''; expected a .csv or .parquet file name"),
    (["sweep", "{spec}", "--out", ""], "out=''; expected a directory path"),
    (["report", "{spec}", "--out", " "], "out=' '; expected a directory path"),
    (["sweep", "{spec}", "--out", "{d}/o", "--devices", "0"], "devices=0; expected 1 <= devices <= "),
    (["optimize", *POINT[1:9], "--trees"], "a draft tree needs a drafter that runs a model; drafter='ngram' runs none"),
    (["point", "--target", "llama-3.1-8b", "--hardware", "h200", "--drafter", "model", "--draft", "llama-3-70b",
      "--alpha", "0.6", "--ignore-memory"],
     "expected a draft model that reads no more per pass than the target llama-3.1-8b holds (8.0B"),
    # an empty entry of a rate list was dropped (every later position moved up one); a word the approximate
    # column does not know was read as "no"; a speedup of 1e30 was told "expected a number > 0"
    (["point", *POINT[1:7], "--acceptance-vector", "0.5,,0.3"], "acceptance_vector='0.5,,0.3': entry 2 is empty"),
    (["validate", "{maybe}"], "column approximate: 'maybe'; expected yes or no"),
    (["validate", "{huge}"], "column measured_speedup: '1e30'; expected a number 0 < measured_speedup < 100"),
])
def test_hostile_first_user_cases(args, text, tmp_path, capsys):
    """A rate list with a word in it named no option ("Invalid value: ..."); a sweep --out that is a file said
    only "File exists"; a CSV naming a column twice was "unknown column 'series_duplicated_0'"; --coordinator
    without --num-processes was ignored (exit 0); --resume with --overwrite dropped --resume silently; a
    crossover map of one column against itself was a polars traceback; model flags given to ingest with an
    acceptance format were ignored, and a benchmark ingested with --drafter ratio wrote rows validate then
    refused; an empty --draft-id was replaced by the default id; a trailing comma in a CSV header was
    "unknown column ''"; one measurements or engine file given twice counted its rows twice; ingest --k beside
    a result's own draft length was dropped."""
    root = pathlib.Path(__file__).parents[1]
    (tmp_path / "f.csv").write_text("x\n")
    head, row = (root / "data" / "measured" / "public.csv").read_text().splitlines()[:2]
    (tmp_path / "dup.csv").write_text(f"{head},series\n{row},again\n")
    (tmp_path / "comma.csv").write_text(f"{head},\n{row},\n")
    (tmp_path / "rows.csv").write_text(f"{head}\n{row}\n")
    cells = dict(zip(head.split(","), range(99)))
    for name, col, v in (("maybe", "approximate", "maybe"), ("huge", "measured_speedup", "1e30")):
        bad = row.split(",")
        bad[cells[col]] = v
        (tmp_path / f"{name}.csv").write_text(f"{head}\n{','.join(bad)}\n")
    eng = root / "tests" / "data" / "engines"
    names = {"{spec}": str(root / "tests" / "data" / "tiny.toml"), "{file}": str(tmp_path / "f.csv"),
             "{dup}": str(tmp_path / "dup.csv"), "{comma}": str(tmp_path / "comma.csv"), "{log}": str(eng / "vllm.log"),
             "{bench}": str(eng / "vllm_bench_base.json"), "{bench2}": str(eng / "vllm_bench_eagle3.json"),
             "{rows}": str(tmp_path / "rows.csv"), "{maybe}": str(tmp_path / "maybe.csv"),
             "{huge}": str(tmp_path / "huge.csv"), "{rows2}": f"{tmp_path}/../{tmp_path.name}/rows.csv"}
    one_line_error(capsys, [names.get(a, a).replace("{d}", str(tmp_path)) for a in args], text)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("o", "r")) and p.name != "rows.csv"]


# --- 6. the first hour ---------------------------------------------------------------------------------------

_SC = dict(target="llama-3.1-8b", hardware="h100-sxm", batch=8, alpha=0.6, draft_cost=0.1)
_LOAD = dict(_SC, input_len=100, output_len=100)


@pytest.mark.parametrize("call, text", [
    (lambda sc: api.point("llama-3.1-8b"), "scenario='llama-3.1-8b'; expected a specjax.Scenario"),
    (lambda sc: api.crossover(None), "scenario=None; expected a specjax.Scenario"),
    (lambda sc: api.point(sc, colour=1), "point: colour=1 is not an input of a Scenario"),
    (lambda sc: api.point(sc, k=2.5), "k=2.5; expected a whole number of draft tokens 0 <= k <= 64"),
    (lambda sc: api.point(sc, dtype="x"), "dtype='x'; expected float32 or float64"),
    (lambda sc: api.point(sc, dtype="float16"), "dtype='float16'; expected float32 or float64"),
    (lambda sc: api.points(sc, batch="abc"), "points: batch='abc'; expected an array of numbers"),
    (lambda sc: api.points(sc, batch=[]), "points: batch is empty"),
    (lambda sc: api.crossover(sc, batch_max=-5), "batch_max=-5; expected 2 <= batch_max <= 1e8"),
    (lambda sc: api.sensitivity(sc, batch_max="x"), "batch_max='x'; expected 2 <= batch_max <= 1e8"),
    (lambda sc: api.optimize(sc, []), "batches=[]; expected a non-empty list of numbers"),
    (lambda sc: api.optimize(sc, "8"), "batches='8'; expected a non-empty list of numbers"),
    (lambda sc: api.optimize(sc, [0]), "batches=0; expected 1 <= batch <= 1e8"),
    (lambda sc: api.optimize(sc, [8], k_max=0), "k_max=0; expected an integer 1 <= k_max <= 64"),
    (lambda sc: api.optimize(sc, [8], method="adam"), "method='adam'; expected 'optax' or 'brute'"),
    (lambda sc: api.optimize_trees(sc, [1]), "a draft tree needs a drafter that runs a model"),
    (lambda sc: api.serve(sc, [1.0]), "serve: the scenario has no serving load; expected input_len and output_len"),
    (lambda sc: api.serve(Scenario(**_LOAD), [-1.0]), "qps=-1.0; expected 0 < qps <= 1e7"),
    (lambda sc: api.serve(Scenario(**_LOAD), []), "qps=[]; expected a non-empty list of numbers"),
    (lambda sc: api.serve(Scenario(**_LOAD), points=0), "points=0; expected an integer 1 <= points <= 10000"),
    (lambda sc: api.serve(Scenario(**_LOAD), [1.0], tpot_slo=-1), "tpot_slo=-1; expected 0 < tpot_slo < 1e6"),
    (lambda sc: api.serve_concurrency(Scenario(**_LOAD), []), "concurrency=[]; expected a non-empty list"),
    (lambda sc: api.serve_concurrency(Scenario(**_LOAD), [0]), "concurrency=0; expected an integer 1 <="),
    (lambda sc: api.serve_concurrency(Scenario(**_LOAD), [2.5]), "concurrency=2.5; expected an integer 1 <="),
])
def test_the_python_api_refuses_wrong_types_by_name(call, text):
    """Hostile review 15: the functions of `specjax.api` took what the CLI checks unchecked: a name where a
    Scenario belongs, an unknown keyword, a string search bound, an empty or scalar batch list, k_max 0 or a
    method the search lacks were AttributeError, TypeError, IndexError or vmap tracebacks; a negative rate,
    a negative search bound, batch 0, k = 2.5 and a float16 dtype (every output null) were answered. Each is
    now one `SpecError` line naming the argument, its value and what is allowed, before any build."""
    with pytest.raises(SpecError) as e:
        call(Scenario(**_SC))
    assert text in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_calibration_on_two_rows_identifies_nothing_and_is_refused(tmp_path):
    """Two speedups cannot bound the errors of 9 engine terms (no residual degrees of freedom): the fit had
    called 7 of them identified (standard error 0, condition number inf) and written the profile. Now
    every term without a bounded error is held, and a fit that identifies none is refused; nothing is
    written."""
    from specjax.engine import calibrate
    from specjax.errors import SpecError
    from specjax.inputs import measured

    p = tmp_path / "c.csv"
    p.write_text("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,"
                 "weight_dtype,measured_speedup,metric,approximate,source_url\n"
                 "A,llama-3.1-8b,eagle,eagle3-llama-3.1-8b,h100-sxm,1,1,3,0.7,,1000,bf16,2.1,throughput,no,u\n"
                 "A,llama-3.1-8b,eagle,eagle3-llama-3.1-8b,h100-sxm,1,32,3,0.7,,1000,bf16,1.6,throughput,no,u\n")
    with pytest.raises(SpecError, match=r"the data identify none of the engine terms \(2 residuals from 2 training"):
        calibrate.fit(measured.load(p), holdout_fraction=0.0, steps=50)
    assert not calibrate.needed(1e-9, 1.0, n_res=2, n_fit=2)  # no degrees of freedom: nothing shown needed
    assert calibrate.needed(0.01, 0.1, n_res=20, n_fit=2)  # (0.1 - 0.01) / 0.01 x 18 = 162 > 4


def test_the_first_real_error_is_reported(capsys):
    """A mistyped --hardware is named (with close matches) before the default drafter's missing cost; the
    cost's message says which drafter needs it and what else to choose."""
    base = ["point", "--target", "llama-3.1-8b", "--alpha", "0.7"]
    one_line_error(capsys, base + ["--hardware", "h100"], "unknown hardware 'h100'; did you mean")
    one_line_error(capsys, base + ["--hardware", "h100-sxm"],
                   "drafter='ratio' (the default) needs draft_cost (--draft-cost, 0 <= c <= 10")
    one_line_error(capsys, base + ["--hardware", "h100-sxm", "--draft-cost", "0.1", "--engine", "vlm"],
                   "unknown engine 'vlm'; did you mean vllm")


def test_point_defaults_to_batch_1(capsys):
    code, out, _ = run(capsys, ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.7",
                                "--draft-cost", "0.1", "--json"])
    r = json.loads(out)
    code1, out1, _ = run(capsys, ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.7",
                                  "--draft-cost", "0.1", "--batch", "1", "--json"])
    assert code == code1 == 0 and r["inputs"]["batch"] == 1 and r == json.loads(out1)


def _gemma2_9b(**kw):
    """google/gemma-2-9b's config.json (no layer_types: transformers alternates sliding and global layers)."""
    cfg = dict(architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_size=3584, intermediate_size=14336,
               num_hidden_layers=42, num_attention_heads=16, num_key_value_heads=8, head_dim=256,
               vocab_size=256000, max_position_embeddings=8192, sliding_window=4096, torch_dtype="float32",
               hidden_activation="gelu_pytorch_tanh")
    cfg.update(kw)
    return {k: v for k, v in cfg.items() if v is not None}


def test_hugging_face_configs_are_read_right_or_refused_by_field(tmp_path, capsys):
    """Gemma-2's 42 layers alternate a 4,096-token window and global attention (21 + 21, was 42 global);
    float32 is fp32 (was bf16); a missing tie_word_embeddings is its class's default (Gemma: tied, Llama:
    untied); an unknown dtype, a window without a known layer pattern, a context beyond
    max_position_embeddings and an EAGLE head of another vocabulary are refused by field."""
    from specjax.inputs import config, models

    a = config.from_dict(_gemma2_9b())
    assert (a.n_full_layers, a.n_window_layers, a.window) == (21, 21, 4096.0)
    assert a.weight_dtype == "fp32" and a.tied is True and a.max_context == 8192
    assert config.from_dict(_gemma2_9b(model_type="gemma3_text", num_hidden_layers=48)).n_full_layers == 8  # 5:1
    llama = {k: v for k, v in json.loads((models.PRESET_DIR / "llama-3.1-8b.json").read_text()).items()
             if k not in ("_specjax", "tie_word_embeddings")}
    assert config.from_dict(llama).tied is False and config.from_dict({**llama, "model_type": "other"}).tied is True
    assert config.from_dict({**llama, "torch_dtype": None, "dtype": "float16"}).weight_dtype == "fp16"
    for bad, field in ((dict(torch_dtype="float8"), "torch_dtype='float8'"),
                       (dict(model_type="starcoder2", sliding_window=4096), "sliding_window=4096")):
        with pytest.raises(Exception, match=field):
            config.from_dict({**llama, **bad})
    p = tmp_path / "gemma.json"
    p.write_text(json.dumps(_gemma2_9b()))
    base = ["point", "--target", str(p), "--hardware", "h100-sxm", "--drafter", "ngram", "--alpha", "0.5"]
    code, out, _ = run(capsys, base + ["--context", "8000", "--json"])
    assert code == 0 and json.loads(out)["inputs"]["weight_dtype"] == "fp32"
    one_line_error(capsys, base + ["--context", "9000"], "context=9000.0")
    one_line_error(capsys, base + ["--context", "9000"], "context <= 8192 tokens, the max_position_embeddings of")
    head = tmp_path / "head.json"
    cfg = json.loads((models.PRESET_DIR / "eagle3-llama-3.1-8b.json").read_text())
    head.write_text(json.dumps({**cfg, "vocab_size": 151936}))
    one_line_error(capsys, ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle",
                            "--draft", str(head), "--alpha", "0.7"],
                   "an EAGLE head with vocab_size 128256 like the target llama-3.1-8b (this one has 151936")


def test_the_report_names_the_dtypes_the_sweep_ran_with(tmp_path):
    """A sweep with weight_dtype fp8 and compute dtype fp8 was reported as bf16 weights and bf16 peaks (the
    config's dtype and a fixed bf16 column); the tables now show what the sweep ran with."""
    from specjax.engine import sweep
    from specjax.inputs import spec
    from specjax.outputs import report

    text = ('name = "f"\nengine = "roofline"\ncompute_dtype = "fp8"\nhardware = ["h100-sxm"]\n[[pairs]]\n'
            'target = "llama-3.1-8b"\ndrafter = "ratio"\ndraft_cost = 0.1\nweight_dtype = "fp8"\n'
            '[fixed]\nk = 3\nkv_dtype = "fp8"\n[axes]\nbatch = [1, 16]\nalpha = [0.7]\n')
    sp = spec.from_text(text, "f.toml")
    sweep.run(sp, tmp_path / "data")
    report.write(sp, tmp_path / "data", tmp_path / "r")
    page = (tmp_path / "r" / "index.html").read_text()
    assert "fp8/fp8" in page and "bf16/bf16" not in page and "bf16_tflops" not in page
    assert "peak_tflops" in page and "1979" in page  # H100 SXM's dense FP8 peak, TFLOP/s


def test_a_sweep_summary_says_its_crossing_is_a_grid_point():
    """The seed sweep's summary printed 222.9 and 1978 (grid points) beside README's bisected 222.4 and
    1974 without a word; the column is now `first_grid_batch_below_1` and the note says why they differ."""
    import polars as pl

    from specjax.cli.sweep import print_summary
    from specjax.outputs import summary

    import contextlib
    import io as _io

    buf = _io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_summary(pl.DataFrame({"hardware": ["h200"], "pair": ["p"], summary.GRID_BELOW_1: [222.9]}))
    assert "first_grid_batch_below_1 222.9" in buf.getvalue() and "`specjax crossover` bisects it" in buf.getvalue()
