"""Engine integration: every parser on the sample files of tests/data/engines (written from the engines'
own logging and result code) by hand, one-line errors for malformed lines and partial scrapes, and the
advise round trip (the emitted table fed back to `point` pays by the margin where k > 0)."""

import bisect
import json
import pathlib
import re
import shutil

import numpy as np
import pytest

from specjax import api
from specjax.cli import main
from specjax.engine import advise, advise_context, emit
from specjax.errors import SpecError
from specjax.inputs import ingest, measured
from specjax.inputs.scenario import Scenario
ENG = pathlib.Path(__file__).parent / "data" / "engines"


def run(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_formats_are_detected():
    want = {"vllm_metrics_before.prom": "vllm-metrics", "vllm.log": "vllm-log", "sglang.log": "sglang-log",
            "trtllm_stats.jsonl": "trtllm-stats", "vllm_bench_base.json": "vllm-bench",
            "vllm_bench_eagle3.json": "vllm-bench", "sglang_bench.jsonl": "sglang-bench"}
    assert {name: ingest.detect(ENG / name) for name in want} == want


def test_vllm_metrics_two_scrapes_give_deltas():
    (row,) = ingest.acceptance([ENG / "vllm_metrics_before.prom", ENG / "vllm_metrics_after.prom"], "vllm-metrics")
    # drafts 3000 - 1000, accepted 4200 - 1500, per position 1200 / 900 / 600
    assert row["drafts"] == 2000 and row["accepted_length"] == pytest.approx(1 + 2700 / 2000)
    assert row["position_rates"] == "0.6000,0.4500,0.3000" and row["k"] == 3
    assert row["acceptance_vector"] == "0.6000,0.7500,0.6667"  # a_i = r_i / r_(i-1)
    assert row["batch"] == 16  # vllm:num_requests_running of the second scrape
    (one,) = ingest.acceptance([ENG / "vllm_metrics_before.prom"], "vllm-metrics")
    assert one["accepted_length"] == pytest.approx(2.5) and one["position_rates"] == "0.7000,0.5000,0.3000"


def test_vllm_log_pairs_each_interval_with_its_batch():
    rows = {r["batch"]: r for r in ingest.acceptance([ENG / "vllm.log"], "vllm-log")}
    assert set(rows) == {1, 8}  # the idle interval (Running: 0) has no SpecDecoding line
    # two intervals at batch 1, each 206 accepted of 609 drafted over k = 3: 203 drafts each
    assert rows[1]["intervals"] == 2 and rows[1]["drafts"] == 406
    assert rows[1]["accepted_length"] == pytest.approx(1 + 412 / 406)
    assert rows[1]["position_rates"] == "0.6010,0.2860,0.1280"
    assert rows[8]["accepted_length"] == pytest.approx(1 + 1800 / 1600)
    assert rows[8]["acceptance_vector"] == "0.5500,0.6364,0.6429"


def test_sglang_log_and_trtllm_stats():
    rows = {r["batch"]: r for r in ingest.acceptance([ENG / "sglang.log"], "sglang-log")}
    assert rows[4]["accepted_length"] == pytest.approx(3.1) and rows[4]["intervals"] == 2
    assert rows[16]["accepted_length"] == pytest.approx(2.8)  # the "accept-len X" form
    (trt,) = ingest.acceptance([ENG / "trtllm_stats.jsonl"], "trtllm-stats")
    # batch 4: 12 draft rounds, 8 + 6 + 4 accepted; the step time of the two decode-only iterations
    assert trt["batch"] == 4 and trt["accepted_length"] == pytest.approx(1 + 18 / 12)
    assert trt["t_sd_step_s"] == pytest.approx(0.013)


def test_benchmark_pairs_become_measurement_rows(tmp_path, capsys):
    out = tmp_path / "m.csv"
    code, text, err = run(capsys, ["ingest", str(ENG / "vllm_bench_base.json"), str(ENG / "vllm_bench_eagle3.json"),
                                   "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle",
                                   "--draft", "eagle3-llama-3.1-8b", "--out", str(out)])
    assert code == 0, err
    (row,) = measured.load(out)
    # a closed-loop benchmark (max_concurrency 16, rate inf) is a row at that concurrency, not a batch of 16:
    # the closed loop predicts it with the prefill of arriving requests (docs/model.md §11)
    assert (row.load_kind, row.concurrency, row.k, row.tau, row.metric) == ("concurrency", 16.0, 3, 2.8, "throughput")
    assert (row.input_len, row.output_len) == (1024.0, 128.0)
    assert row.speedup == pytest.approx(2400 / 1500) and row.engine == "vllm"
    sg = tmp_path / "s.csv"
    code, _, err = run(capsys, ["ingest", str(ENG / "sglang_bench.jsonl"), "--target", "llama-3.1-8b", "--hardware",
                                "h100-sxm", "--drafter", "eagle", "--draft", "eagle3-llama-3.1-8b", "--k", "3",
                                "--out", str(sg)])
    assert code == 0, err
    (rate,) = measured.load(sg)
    assert rate.is_rate and (rate.qps, rate.input_len, rate.output_len) == (4.0, 1024.0, 256.0)
    assert rate.speedup == pytest.approx(11.0 / 6.875) and rate.metric == "tpot" and rate.tau == 3.1
    code, text, _ = run(capsys, ["validate", str(out), str(sg), "--json"])
    assert code == 0 and json.loads(text.strip().splitlines()[-1])["rows"] == 2


@pytest.mark.parametrize("name,edit,fmt,msg", [
    ("vllm.log", lambda t: t.replace("Accepted: 1800 tokens", "Accepted: many tokens"), "vllm-log",
     "line 9: Accepted = 'many tokens'; expected a whole number >= 0"),
    ("vllm.log", lambda t: t.replace("Running: 1 reqs", "Running: ? reqs"), "vllm-log",
     "line 3: Running = '?'; expected a whole number in [0, 1e+08]"),
    ("sglang.log", lambda t: t.replace("accept len: 3.00", "accept len: 99.0"), "sglang-log",
     "line 4: accept len = '99.0'; expected a number in [1, 65]"),
    ("trtllm_stats.jsonl", lambda t: t.replace('"numAcceptedTokens": 6,', '"numAcceptedTokens": "six",'),
     "trtllm-stats", "line 3: numAcceptedTokens = 'six'; expected a number >= 0"),
    ("trtllm_stats.jsonl", lambda t: t + "{not json\n", "trtllm-stats", "line 5: malformed JSON"),
    ("vllm_metrics_before.prom", lambda t: re.sub(r"vllm:spec_decode_num_draft_tokens_total\{.*\n", "", t),
     "vllm-metrics", "a partial scrape: no vllm:spec_decode_num_draft_tokens_total"),
    ("vllm_metrics_before.prom", lambda t: t.replace("} 1500.0", "} lots"), "vllm-metrics",
     "line 12: value 'lots'; expected a finite number >= 0"),
    ("vllm_metrics_before.prom", lambda t: t.replace("} 8.0", "} inf"), "vllm-metrics",  # found by tools/fuzz.py
     "line 3: value 'inf'; expected a finite number >= 0"),
])
def test_malformed_inputs_get_one_line_errors(tmp_path, capsys, name, edit, fmt, msg):
    p = tmp_path / name
    p.write_text(edit((ENG / name).read_text()))
    with pytest.raises(SpecError, match=re.escape(msg)):
        ingest.acceptance([p], fmt)
    code, _, err = run(capsys, ["ingest", str(p), "--format", fmt, "--out", str(tmp_path / "o.csv")])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("key,value", [("spec_decode_acceptance_length", {}), ("max_concurrency", "x"),
                                       ("request_rate", [1]), ("spec_decode_per_position_acceptance_rates", 3)])
def test_benchmark_results_with_wrong_types_are_refused(tmp_path, capsys, key, value):
    """A benchmark result whose numbers are not numbers (found by tools/fuzz.py: a dict where the accepted
    length belongs crashed ingest) gets one line naming the file, the line and the key."""
    r = json.loads((ENG / "vllm_bench_eagle3.json").read_text())
    p = tmp_path / "sd.json"
    p.write_text(json.dumps({**r, key: value}))
    code, _, err = run(capsys, ["ingest", str(ENG / "vllm_bench_base.json"), str(p), "--target", "llama-3.1-8b",
                                "--hardware", "h100-sxm", "--drafter", "eagle", "--draft", "eagle3-llama-3.1-8b",
                                "--out", str(tmp_path / "m.csv")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and key in err and "sd.json" in err, err
    assert not (tmp_path / "m.csv").exists()


def test_restarted_server_and_unpaired_results_are_refused(tmp_path):
    with pytest.raises(SpecError, match="vllm:spec_decode_num_drafts_total fell from 3000 to 1000"):
        ingest.vllm_metrics([ENG / "vllm_metrics_after.prom", ENG / "vllm_metrics_before.prom"])
    shutil.copy(ENG / "vllm_bench_eagle3.json", tmp_path / "sd.json")
    with pytest.raises(SpecError, match="without a baseline at max_concurrency=16.0"):
        ingest.pair_results(ingest.bench_results(tmp_path / "sd.json", "vllm-bench"))
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(SpecError, match="cannot tell the format; give --format"):
        ingest.detect(tmp_path / "x.txt")


SC = dict(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b",
          position_rates=(0.601, 0.286, 0.128), engine="vllm")
SC_STEPS = {**SC, "engine": "trtllm"}  # k steps down over batch (3 to 78, 2 to 198): a two-range schedule
# DeepSeek-V3 with its MTP head, attention DP over 8 ranks, EP 8 (the usual DeepSeek deployment)
DS = dict(target="deepseek-v3", hardware="h200", tp=1, dp_attention=8, ep=8, drafter="mtp",
          position_rates=(0.8, 0.55, 0.35), engine="sglang")


# The engines' own reading rules, re-implemented from their code (not from specjax.engine.emit):
# what k each engine drafts at every batch 1..admission limit (per engine rank) for a configuration.

def vllm_reads(cfg, dp=1):
    """vLLM: `build_dynamic_sd_schedule_lookup` (vllm/v1/spec_decode/dynamic/utils.py) on 3-item ranges;
    with --data-parallel-size > 1 the table is dropped (`_maybe_disable_dynamic_sd_for_data_parallel`)."""
    n, spec = cfg["max_num_seqs"], cfg.get("speculative_config")
    if spec is None:
        return [0] * n
    top, table = spec["num_speculative_tokens"], spec.get("num_speculative_tokens_per_batch_size")
    assert top > 0
    if table is None or dp > 1:
        return [top] * n
    table = sorted(tuple(int(x) for x in e) for e in table)
    assert table[0][0] == 1 and all(a[1] < b[0] for a, b in zip(table, table[1:]))  # validate_and_normalize
    assert all(lo <= hi and k >= 0 for lo, hi, k in table)
    dense, next_bs, last_k = [0] * (n + 1), 1, None
    for lo, hi, k in table:
        if lo > next_bs and last_k is not None:  # a gap inherits the previous k
            for bs in range(next_bs, min(lo, n + 1)):
                dense[bs] = min(top, last_k)
        for bs in range(max(lo, next_bs), min(hi, n) + 1):
            dense[bs] = min(top, k)
        next_bs, last_k = max(next_bs, hi + 1), k
        if next_bs > n:
            break
    for bs in range(next_bs, n + 1):  # above the last range: its k
        dense[bs] = min(top, last_k)
    return dense[1:]


def trtllm_reads(cfg, version):
    """TensorRT-LLM: `validate_draft_len_schedule_and_sort` and `get_draft_len_for_batch_size`; up to 1.2
    the largest key <= batch (bisect_right, key 1 = max_draft_len required), from 1.3 the first key >= batch
    (bisect_left) and 0 above the largest key (smallest key = max_draft_len); plain MTP ignores the schedule;
    max_concurrency: speculation while the batch is <= it."""
    n, spec = cfg["max_batch_size"], cfg.get("speculative_config")
    if spec is None:
        return [0] * n
    if spec["decoding_type"] == "MTP":
        assert "draft_len_schedule" not in spec
        key = "max_draft_len" if version >= (1, 3) else "num_nextn_predict_layers"
        return [spec[key]] * n
    top, sched, conc = spec["max_draft_len"], spec.get("draft_len_schedule"), spec.get("max_concurrency")
    assert top > 0 and not (sched and conc)  # mutually exclusive
    if sched is None:
        return [top if conc is None or b <= conc else 0 for b in range(1, n + 1)]
    s = {int(k): v for k, v in sched.items()}
    keys = sorted(s)
    assert all(0 <= v <= top for v in s.values())
    if version >= (1, 3):
        assert s[keys[0]] == top
        return [s[keys[bisect.bisect_left(keys, b)]] if bisect.bisect_left(keys, b) < len(keys) else 0
                for b in range(1, n + 1)]
    assert 1 in s and s[1] == top
    return [s[keys[bisect.bisect_right(keys, b) - 1]] for b in range(1, n + 1)]


def sglang_reads(cfg, files, dp=1):
    """SGLang: one k (--speculative-num-steps) everywhere, or `AdaptiveSpeculativeParams`: a batch is padded
    up to the next --cuda-graph-bs (`AdaptiveStepRouter.batch_size_key_for_batch`), takes the slot of the
    largest key <= it, and a slot with one candidate step runs it."""
    n = cfg["max_running_requests"] // dp
    assert n * dp == cfg["max_running_requests"]
    if "speculative_algorithm" not in cfg:
        return [0] * n
    steps = cfg["speculative_num_steps"]
    assert cfg["speculative_eagle_topk"] == 1 and cfg["speculative_num_draft_tokens"] == steps + 1
    if not cfg.get("speculative_adaptive"):
        return [steps] * n
    slots = {int(key): e["candidate_steps"] for key, e in files[cfg["speculative_adaptive_config"]].items()}
    keys, graph, out = sorted(slots), sorted(cfg["cuda_graph_bs"]), []
    for b in range(1, n + 1):
        i = bisect.bisect_left(graph, b)
        g = graph[i] if i < len(graph) else b
        (k,) = set(slots[keys[max(0, bisect.bisect_right(keys, g) - 1)]])
        out.append(k)
    return out


def reads(engine, res, version, dp=1):
    if engine == "vllm":
        return vllm_reads(res["config"], dp)
    if engine == "trtllm":
        return trtllm_reads(res["config"], version)
    return sglang_reads(res["config"], res["files"], dp)


ENGINE_VERSIONS = [("vllm", "0.29"), ("vllm", "0.23"), ("trtllm", "1.3"), ("trtllm", "1.2"), ("trtllm", "1.1"),
                   ("sglang", "0.5.20"), ("sglang", "0.5.4")]


@pytest.mark.parametrize("name,sc", [("readme", SC_STEPS), ("deepseek-v3 mtp dp8", DS)])
def test_each_engine_drafts_the_advised_k_at_every_batch(name, sc):
    """Round trip: the emitted configuration read by each engine's own rule gives `runs` at every batch
    1..admission limit; `runs` is the advice unless a warning says why not (and what that costs)."""
    sc = Scenario(**sc)
    ranges, table, _ = advise.schedule(sc, 256, k_max=3 if sc.drafter == "mtp" else 6)
    advised = emit.per_batch(ranges)
    for engine, version in ENGINE_VERSIONS:
        v = emit.parse_version(engine, version)
        res = advise.emit(engine, sc, ranges, table, version=version)
        got = reads(engine, res, v, sc.dp_attention)
        assert got == emit.per_batch(res["runs"]), (engine, version)
        assert res["runs"][-1][1] <= ranges[-1][1] and len(got) == res["runs"][-1][1]
        same = got == advised
        if not same:  # the engine cannot run the advice: a warning says what it runs and what that costs
            assert any("would gain" in w or "leaves" in w for w in res["warnings"]), (engine, version, res)
        if (engine, version) in (("vllm", "0.29"), ("trtllm", "1.3"), ("sglang", "0.5.20")) and sc.dp_attention == 1:
            assert same, (engine, version)  # the newest versions run the README example's advice exactly
    if sc.dp_attention > 1:  # every engine runs one k here, per rank, and says what the table would have gained
        vl = advise.emit("vllm", sc, ranges, table)
        assert "num_speculative_tokens_per_batch_size" not in vl["config"]["speculative_config"]
        assert any("--data-parallel-size 8 drops" in w for w in vl["warnings"])
        sg = advise.emit("sglang", sc, ranges, table)
        assert sg["config"]["max_running_requests"] == 8 * sg["runs"][-1][1]  # SGLang counts all DP ranks


def test_readme_example_emits_each_engines_keys():
    sc = Scenario(**SC_STEPS)
    ranges, table, _ = advise.schedule(sc, 256, k_max=6)
    assert ranges == [[1, 78, 3], [79, 198, 2]]  # admission limit 198: from 199 the drafter does not fit
    for b, k in ((1, 3), (78, 3), (79, 2), (198, 2)):  # fed back to `point`: the table's speedup, paying by the margin
        s = api.point(Scenario(**SC_STEPS, batch=float(b), k=k))["speedup"]
        assert s == pytest.approx(table[b - 1, k - 1], rel=1e-5) and s >= 1 + advise.MARGIN
    assert api.point(Scenario(**SC_STEPS, batch=199.0, k=1))["status"] != "ok"
    trt = advise.emit("trtllm", sc, ranges, table)["config"]
    assert trt["max_batch_size"] == 198 and trt["speculative_config"]["draft_len_schedule"] == {"78": 3, "198": 2}
    old = advise.emit("trtllm", sc, ranges, table, version="1.2")
    assert old["config"]["speculative_config"]["draft_len_schedule"] == {"1": 3, "79": 2}
    assert old["engine_version"]["minimum"] == "1.2" and any("1.3 and later read" in w for w in old["warnings"])
    vl = advise.emit("vllm", sc, ranges, table)
    spec = vl["config"]["speculative_config"]
    assert vl["config"]["max_num_seqs"] == 198 and spec["num_speculative_tokens_per_batch_size"] == ranges
    assert spec["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" and vl["engine_version"]["minimum"] == "0.24"
    sg = advise.emit("sglang", sc, ranges, table)
    assert sg["files"]["specjax-adaptive.json"] == {"1": {"candidate_steps": [3]}, "79": {"candidate_steps": [2]}}
    assert {78, 198} <= set(sg["config"]["cuda_graph_bs"]) and sg["config"]["max_running_requests"] == 198
    assert "--speculative-adaptive --speculative-adaptive-config specjax-adaptive.json" in sg["command_line"]


SYNTH = np.array([[1.30, 1.25, 1.10]] * 10 + [[1.10, 1.40, 1.20]] * 10 + [[0.95, 0.90, 0.80]] * 20)


@pytest.mark.parametrize("ranges,trt_runs", [
    ([[1, 10, 2], [11, 20, 3], [21, 40, 0]], [[1, 20, 2], [21, 40, 0]]),  # no batch may draft more than the first
    ([[1, 10, 0], [11, 20, 2], [21, 40, 0]], [[1, 40, 0]]),  # off at batch 1: TensorRT-LLM cannot switch it on
    ([[1, 40, 0]], [[1, 40, 0]]),  # every range off
])
def test_emitted_configs_never_contradict_the_advice(ranges, trt_runs):
    """No schedule whose smallest key maps to 0 beside max_draft_len > 0, no configuration that switches
    speculation on where every range is off, and the engine's reading equals the `runs` each emitter states."""
    sc = Scenario(**SC)
    for engine, version in ENGINE_VERSIONS:
        v = emit.parse_version(engine, version)
        res = advise.emit(engine, sc, ranges, SYNTH, version=version)
        assert reads(engine, res, v) == emit.per_batch(res["runs"]), (engine, version)
        if engine == "trtllm" and v >= (1, 2):
            assert res["runs"] == trt_runs
        if max(k for _, _, k in res["runs"]) == 0:  # off everywhere: no speculative key at all
            assert not {"speculative_config", "speculative_algorithm"} & set(res["config"]), res
            assert any("leave" in w for w in res["warnings"])
        spec = res["config"].get("speculative_config") or {}
        if "draft_len_schedule" in spec:
            s = {int(k): x for k, x in spec["draft_len_schedule"].items()}
            assert s[min(s)] == spec["max_draft_len"] > 0


def test_float32_ties_do_not_flap():
    """A larger k is chosen only when it beats the smaller one by more than the relative tolerance."""
    eps = np.float32(1e-7)
    table = np.array([[1.2, 1.2 + eps, 1.1], [1.2 + eps, 1.2, 1.1], [1.2, 1.2 + 2 * eps, 1.1], [1.1, 1.2, 1.3]])
    k, best = advise.choose(table, margin=0.03)
    assert k.tolist() == [1, 1, 1, 3] and best[-1] == 1.3
    assert advise.choose(table, margin=0.03, tie=0.0)[0].tolist() == [2, 1, 2, 3]
    assert advise.choose(np.array([[1.02, 1.01]]), margin=0.03)[0].tolist() == [0]  # pays by less than the margin


def test_dp_attention_ranges_are_per_engine_rank():
    """Under DP attention over 8 ranks, batch b of a range is b requests per rank: 8b in the replica."""
    sc = Scenario(**DS)
    ranges, table, _ = advise.schedule(sc, 40, k_max=2)
    for b in (1, 17, 40):
        s = api.point(Scenario(**DS, batch=8.0 * b, k=2))["speedup"]
        assert table[b - 1, 1] == pytest.approx(s, rel=1e-5)


def test_draft_named_as_the_engine_loads_it():
    sc = Scenario(**SC)
    assert emit.draft_name(sc) == ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", None)
    assert emit.draft_name(sc, "my-org/eagle3") == ("my-org/eagle3", None)
    path = ENG.parent / "eagle3.json"
    if path.exists():
        name, why = emit.draft_name(Scenario(**{**SC, "draft": str(path)}))
        assert name == str(path) and "--draft-id" in why
    assert emit.draft_name(Scenario(**DS)) == (None, None)  # MTP: the target's own head


def test_advise_cli_json(capsys):
    args = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
            "eagle3-llama-3.1-8b", "--position-rates", "0.601,0.286,0.128", "--max-num-seqs", "64", "--k-max", "6",
            "--emit", "trtllm", "--engine-version", "1.2", "--json"]
    code, text, err = run(capsys, args)
    assert code == 0, err
    r = json.loads(text)
    assert r["emit"] == "trtllm" and r["ranges"][0]["batches"][0] == 1 and r["ranges"][-1]["batches"][1] == 64
    assert r["admission_limit"] == r["config"]["max_batch_size"] == 64 and r["engine_version"]["target"] == "1.2"
    assert all(x["speedup_min"] >= 1 + r["margin"] - 1e-6 for x in r["ranges"] if x["k"])
    code, _, err = run(capsys, ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--draft-cost", "0.1",
                                "--alpha", "0.7"])
    assert code == 2 and "has no engine configuration" in err
    code, _, err = run(capsys, args[:-3] + ["--engine-version", "0.9", "--json"])
    assert code == 2 and "engine_version='0.9'" in err and "trtllm >= 1.0" in err and len(err.strip().splitlines()) == 1


def test_sglang_configuration_carries_its_speculative_cap(capsys):
    """SGLang with speculation on and no --max-running-requests runs at most 48 requests (`server_args.py`), so
    without --max-num-seqs the emitted configuration says so: admission limit 48, `--max-running-requests 48`;
    a smaller --max-num-seqs caps it further."""
    args = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
            "eagle3-llama-3.1-8b", "--position-rates", "0.601,0.286,0.128", "--engine", "sglang", "--k-max", "3",
            "--json"]
    for extra, cap in (([], 48), (["--max-num-seqs", "32"], 32)):
        code, text, err = run(capsys, args + extra)
        assert code == 0, err
        r = json.loads(text)
        assert r["emit"] == "sglang" and r["admission_limit"] == r["config"]["max_running_requests"] == cap
        assert f"--max-running-requests {cap}" in r["command_line"] and r["runs"][-1][1] == cap


def test_engine_profile_carries_its_engine_version(tmp_path, capsys):
    """`engine_version` in an engine profile is the default of advise's --engine-version when the profile is
    for the emitted engine (its name); --engine-version still wins; a bad one fails when the profile is read."""
    from specjax.inputs import engines

    base = (pathlib.Path(engines.PRESET_DIR) / "trtllm.toml").read_text()
    prof = tmp_path / "my-trt.toml"
    prof.write_text('engine_version = "1.2"\n' + base)
    loaded = engines.load(str(prof))
    assert loaded.version_for("trtllm") == "1.2" and loaded.version_for("vllm") is None
    args = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
            "eagle3-llama-3.1-8b", "--position-rates", "0.601,0.286,0.128", "--max-num-seqs", "64", "--k-max", "6",
            "--emit", "trtllm", "--engine", str(prof), "--json"]
    code, text, err = run(capsys, args)
    assert code == 0, err
    assert json.loads(text)["engine_version"]["target"] == "1.2"  # the profile's, not the default 1.3
    code, text, err = run(capsys, args + ["--engine-version", "1.3"])
    assert code == 0 and json.loads(text)["engine_version"]["target"] == "1.3", err
    code, text, err = run(capsys, args[:-5] + ["--emit", "vllm", "--engine", str(prof), "--json"])
    assert code == 0 and json.loads(text)["engine_version"]["target"] == "0.29", err  # not a vLLM profile
    for bad, msg in (('"0.9"', "trtllm >= 1.0"), ('"latest"', "a version like"), ("1.2", "a string")):
        prof.write_text(f"engine_version = {bad}\n" + base)
        with pytest.raises(SpecError, match=msg) as e:
            engines.load(str(prof))
        assert "engine_version" in str(e.value) and str(prof) in str(e.value)


def test_advise_over_a_request_rate_range(capsys):
    """With --qps-max the table still covers every batch up to the admission limit (a burst runs there)."""
    args = ["advise", "--target", "llama-3-70b", "--hardware", "h100-sxm", "--tp", "4", "--drafter", "model", "--draft",
            "qwama-0.5b", "--draft-tp", "1", "--alpha", "0.7", "--qps-max", "2", "--input-len", "220", "--output-len",
            "200", "--max-num-seqs", "128", "--json"]
    code, text, err = run(capsys, args)
    assert code == 0, err
    r = json.loads(text)
    top = max(r["served_by_qps"]["batch_base"], r["served_by_qps"]["batch_sd"])
    assert top < r["admission_limit"] == r["ranges"][-1]["batches"][1] == 128
    assert r["served_by_qps"]["qps"] == 2 and r["config"]["max_num_seqs"] == 128


def test_advise_names_eagle_heads_by_version():
    """An EAGLE-1/2 head is `EAGLE` in SGLang and `eagle` in vLLM, an EAGLE-3 head `EAGLE3` / `eagle3`."""
    for draft, sgl, vllm in (("eagle-llama-3.1-8b", "EAGLE", "eagle"), ("eagle3-llama-3.1-8b", "EAGLE3", "eagle3")):
        sc = Scenario(engine="roofline",
                      target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft=draft, alpha=0.7)
        assert (emit.method(sc, "sglang"), emit.method(sc, "vllm")) == (sgl, vllm)


def test_trtllm_schedule_under_attention_dp_warns_of_rank_local_lengths():
    sc = Scenario(**{**SC, "dp_attention": 2})
    ranges = [[1, 10, 2], [11, 20, 1], [21, 40, 0]]
    res = advise.emit("trtllm", sc, ranges, SYNTH)
    assert res["config"]["speculative_config"]["draft_len_schedule"] == {"10": 2, "20": 1}
    assert trtllm_reads(res["config"], (1, 3)) == emit.per_batch(ranges)
    assert any("each rank's own batch" in w for w in res["warnings"])
    sg = advise.emit("sglang", sc, ranges, SYNTH)  # adaptive steps refused under attention DP: one k
    assert sg["config"]["max_running_requests"] == 2 * sg["runs"][-1][1] and "speculative_adaptive" not in sg["config"]


# advise over context (`engine.advise_context`): the batch x context table, the one batch table, its loss

def test_advice_at_one_context_is_the_1d_advice():
    """The 2-D advice at one context is today's 1-D advice: the same cells, ranges and table (the README example)."""
    sc = Scenario(**SC_STEPS)
    ranges, table, _ = advise.schedule(sc, 256, k_max=6)
    adv = advise_context.advise_over(sc, [sc.context], 256, k_max=6)
    assert adv["ranges"] == ranges == [[1, 78, 3], [79, 198, 2]] and adv["admission"] == [198]
    np.testing.assert_array_equal(adv["mean"], table)
    np.testing.assert_array_equal(adv["table"][0], table)
    assert adv["k"][0].tolist() == emit.per_batch(ranges) and set(adv["why"][0]) == {None}
    assert [r[:3] for r in advise_context.ranges_of(adv["k"][0], adv["why"][0])] == ranges


def test_k_over_context_follows_the_attention_roofline():
    """Longer context: more KV per sequence, read once per verify pass by all k + 1 tokens. Where that read is
    memory-bound the verify pass amortizes it and the best k rises with context (Llama-3.1-8B, GQA: 32 query
    heads on 8 KV heads of 128 in bf16, 2 x 32 x 128 x 2 FLOPs per (k + 1) tokens against 2 x 8 x 128 x 2
    bytes: 4 (k + 1) FLOP/byte, far below the H100's 989.5e12 / 3.35e12 = 295). Where it is compute-bound the
    k + 1 tokens pay its FLOPs each and the best k falls (DeepSeek-V3, absorbed MLA: 2 x 128 heads x (576 + 512)
    FLOPs per token per latent of 576 elements, 242 FLOP/byte even in 2-byte KV, above the H200's
    989.5e12 / 4.8e12 = 206; with 100x the FLOP/s the same cell keeps k = 3 and pays more at long context). Per
    rank batch 12, contexts 1024 and 32768; the 32768 column of the one jitted call is the single-context advice
    at 32768 and `point` at a cell."""
    assert 2 * 32 * 128 * 2 / (2 * 8 * 128 * 2) == 4 and 989.5e12 / 3.35e12 > 4 * 7
    assert 2 * 128 * (576 + 512) / (576 * 2) > 989.5e12 / 4.8e12
    ds = advise_context.advise_over(Scenario(**DS), [1024, 32768], 16, k_max=3)
    assert ds["k"][:, 11].tolist() == [3, 2]  # falls (compute-bound attention)
    hw, deploy, tgt, draft, dec = Scenario(**DS).build()  # the same kernel with 100x the FLOP/s: memory-bound
    fast = np.asarray(advise._grid(hw.replace(flops_per_s=hw.flops_per_s * 100), deploy, tgt, draft, dec,
                                   np.float32([1024, 32768]), np.float32(8 * np.arange(1, 17)), 3))
    assert (np.nanargmax(fast[:, 11], axis=1) + 1).tolist() == [3, 3] and fast[1, 11, 2] > fast[0, 11, 2]
    llama = advise_context.advise_over(Scenario(**SC), [1024, 32768], 16, k_max=6)
    assert llama["k"][:, 11].tolist() == [2, 3]  # rises (memory-bound attention)
    best = np.nanmax(llama["table"][:, 11], axis=1)
    assert best[1] > best[0]  # and speculation pays more
    assert llama["admission"] == [16, 12] and llama["why"][1][12:] == ["does_not_fit"] * 4
    long = Scenario(**{**SC, "context": 32768.0})
    ranges, table, _ = advise.schedule(long, 16, k_max=6)
    assert emit.per_batch(ranges) == llama["k"][1, :12].tolist()
    np.testing.assert_allclose(llama["table"][1, :12], table, rtol=1e-6)
    s = api.point(Scenario(**DS, context=32768.0, batch=8.0 * 12, k=2))["speedup"]
    assert ds["table"][1, 11, 1] == pytest.approx(s, rel=1e-5)


# two contexts over 40 batches (k = 1..3): the short one pays best at k = 2, the long one at k = 3 up to batch 20,
# both at k = 1 beyond; the long one admits 30 batches
SYNTH2 = np.array([[[1.30, 1.50, 1.40]] * 20 + [[1.20, 1.10, 1.00]] * 20,
                   [[1.30, 1.40, 1.60]] * 20 + [[1.25, 1.10, 0.90]] * 10 + [[np.nan] * 3] * 10])


def _stated_loss_by_cell(adv, runs):
    """S(advised k) - S(k run) at every cell that fits, recomputed cell by cell (S = 1 at k = 0)."""
    ran = emit.per_batch(runs)
    out = {}
    for i, c in enumerate(adv["contexts"]):
        for b in range(1, min(adv["admission"][i], len(ran)) + 1):
            s = [1.0 if k == 0 else adv["table"][i, b - 1, k - 1] for k in (adv["k"][i, b - 1], ran[b - 1])]
            out[c, b] = s[0] - s[1]
    return out


def test_one_batch_table_is_what_each_engine_runs_and_its_loss_is_stated():
    """The one batch table (the best mean speedup over the contexts where each batch fits) read back by each
    engine's own rule is the emitted `runs`; the newest versions run the table itself; the stated loss is the
    2-D advice's speedup less the speedup of the k run, cell by cell. By hand: batches 1-20 average
    (1.30, 1.45, 1.50) -> k = 3; 21-30 (1.225, 1.10, 0.95) and 31-40 (the short context alone) -> k = 1; the
    short context advised k = 2 at batches 1-20 loses 1.50 - 1.40 = 0.10 per cell there, every other cell 0:
    mean 20 x 0.10 / 70 cells."""
    adv = advise_context.from_table([1024.0, 32768.0], SYNTH2, [40, 30])
    assert adv["ranges"] == [[1, 20, 3], [21, 40, 1]]
    np.testing.assert_allclose(adv["mean"][0], [1.30, 1.45, 1.50]) and np.testing.assert_allclose(
        adv["mean"][25], [1.225, 1.10, 0.95])
    assert adv["k"][:, 0].tolist() == [2, 3] and adv["why"][1][30:] == ["does_not_fit"] * 10
    sc = Scenario(**SC)
    for engine, version in ENGINE_VERSIONS:
        v = emit.parse_version(engine, version)
        res = advise.emit(engine, sc, adv["ranges"], adv["mean"], version=version)
        assert reads(engine, res, v) == emit.per_batch(res["runs"]), (engine, version)
        if (engine, version) in (("vllm", "0.29"), ("trtllm", "1.3"), ("sglang", "0.5.20")):
            assert res["runs"] == adv["ranges"], (engine, version)
        lost = advise_context.loss(adv, res["runs"])
        by_cell = _stated_loss_by_cell(adv, res["runs"])
        assert lost["cells"] == len(by_cell) and lost["mean"] == pytest.approx(np.mean(list(by_cell.values())))
        assert lost["worst"]["loss"] == pytest.approx(max(by_cell.values()))
        for seg in lost["segments"]:
            got = [by_cell[seg["context"], b] for b in range(seg["batches"][0], seg["batches"][1] + 1)]
            assert seg["loss_max"] == pytest.approx(max(got)) and seg["loss_mean"] == pytest.approx(np.mean(got))
    lost = advise_context.loss(adv, adv["ranges"])
    assert lost["worst"] == dict(context=1024.0, batch=1, k_advised=2, k_runs=3, speedup_advised=1.5,
                                 speedup_runs=1.4, loss=pytest.approx(0.10))
    assert lost["mean"] == pytest.approx(20 * 0.10 / 70) and lost["cells"] == 70


def test_loss_of_one_k_over_context_checked_against_point():
    """DeepSeek-V3 MTP, attention DP 8 (every engine runs one k): the worst cell's loss is the difference of two
    `point` speedups at that context and batch, the advised k and the k run."""
    sc = Scenario(**DS)
    adv = advise_context.advise_over(sc, [1024, 4096, 16384], 40, k_max=3)
    assert adv["admission"] == [40, 40, 26] and adv["ranges"] == [[1, 33, 3], [34, 40, 2]]
    for engine, version in ENGINE_VERSIONS:
        res = advise.emit(engine, sc, adv["ranges"], adv["mean"], version=version)
        assert reads(engine, res, emit.parse_version(engine, version), 8) == emit.per_batch(res["runs"])
    res = advise.emit("vllm", sc, adv["ranges"], adv["mean"])
    assert res["runs"] == [[1, 40, 3]]  # vLLM drops the table under DP
    w = advise_context.loss(adv, res["runs"])["worst"]
    assert (w["context"], w["batch"], w["k_advised"], w["k_runs"]) == (16384, 26, 2, 3)
    s = {k: api.point(Scenario(**DS, context=16384.0, batch=8.0 * 26, k=k))["speedup"] for k in (2, 3)}
    assert w["loss"] == pytest.approx(s[2] - s[3], rel=1e-4) and w["loss"] > 0.03


def test_advise_over_contexts_cli(capsys):
    """--context repeats: the grid in text, `over_context` in JSON (per context the 1-D ranges with why each is
    off, bands, the loss); one context keeps today's output with over_context null; a repeated context is
    refused in one line."""
    base = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
            "eagle3-llama-3.1-8b", "--position-rates", "0.601,0.286,0.128", "--max-num-seqs", "16", "--k-max", "6"]
    code, text, err = run(capsys, base + ["--context", "32768", "--context", "1024", "--json"])
    assert code == 0, err
    r = json.loads(text)
    o = r["over_context"]
    assert r["contexts"] == [1024, 32768] and "context" not in r["inputs"] and o["engine_reads_context"] is False
    assert [c["context"] for c in o["columns"]] == [1024, 32768] and [c["admission_limit"] for c in o["columns"]] \
        == [16, 12]
    assert [(x["batches"], x["k"], x["off_because"]) for x in o["columns"][1]["ranges"]] == \
        [([1, 6], 2, None), ([7, 12], 3, None), ([13, 16], 0, "does_not_fit")]
    assert [b["contexts"] for b in o["bands"]] == [[1024, 1024], [32768, 32768]]
    assert set(o["loss"]) == {"worst", "mean", "cells", "segments"} and o["loss"]["cells"] == 16 + 12
    assert r["runs"] == [[1, 16, 2]] and o["loss"]["worst"]["loss"] > 0  # k = 2 where 32768 wants 3 (7-12)
    assert o["loss"] == o["loss_of_batch_table"]  # vLLM 0.29 runs the one batch table as emitted
    assert r["warnings"][0].startswith(emit.CONTEXT_TABLE["vllm"]) and "loses up to" in r["warnings"][0]
    code, text, _ = run(capsys, base + ["--context", "32768", "--context", "1024"])
    rows = [ln.split() for ln in text.splitlines()]
    assert code == 0 and ["batches", "1024", "32768"] in rows and ["7-12", "2", "3"] in rows
    assert ["13-16", "2", "x"] in rows and ["admission", "16", "12"] in rows
    code, text, _ = run(capsys, base + ["--json"])
    one = json.loads(text)
    assert one["over_context"] is None and one["contexts"] == [2048] and one["inputs"]["context"] == 2048
    code, _, err = run(capsys, base + ["--context", "1024", "--context", "1024"])
    assert code == 2 and "--context 1024 given twice" in err and len(err.strip().splitlines()) == 1
