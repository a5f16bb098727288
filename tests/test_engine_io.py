"""Engine integration: every parser on the sample files of tests/data/engines (written from the engines'
own logging and result code) by hand, one-line errors for malformed lines and partial scrapes, and the
advise round trip (the emitted table fed back to `point` pays by the margin where k > 0)."""

import json
import pathlib
import re
import shutil

import pytest

from specjax import api
from specjax.cli import main
from specjax.engine import advise
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
    assert (row.batch, row.k, row.tau, row.metric) == (16.0, 3, 2.8, "throughput")
    assert row.speedup == pytest.approx(2400 / 1500) and row.context == pytest.approx(1024 + 128 / 2)
    assert row.engine == "vllm"
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
SC_STEPS = {**SC, "engine": "trtllm"}  # k steps down twice over batch (3, 2, off): a TensorRT-LLM schedule


def test_advise_round_trips_through_point():
    sc = Scenario(**SC_STEPS)
    ranges, table, best = advise.schedule(sc, 256, k_max=6)
    assert ranges[0][0] == 1 and ranges[-1][1] == 256
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, no overlap
    assert any(k == 0 for _, _, k in ranges) and any(k > 0 for _, _, k in ranges)
    for first, last, k in ranges:
        for b in sorted({first, (first + last) // 2, last}):
            if k:  # fed back to `point`: it pays by the margin on the whole range
                s = api.point(Scenario(**SC_STEPS, batch=float(b), k=k))["speedup"]
                assert s >= 1 + advise.MARGIN - 1e-6, (b, k, s)
            else:  # where it is off, no k in 1..k_max pays by the margin, or none fits in memory
                for kk in range(1, 7):
                    p = api.point(Scenario(**SC_STEPS, batch=float(b), k=kk))
                    assert p["speedup"] < 1 + advise.MARGIN or p["status"] != "ok", (b, kk, p)
    why = [r["off_because"] for r in advise.expected(ranges, table) if not r["k"]]
    assert why and set(why) <= {"does_not_fit", "does_not_pay"}
    cfg, line, warnings = advise.emit("vllm", sc, ranges, table, best, 256)
    assert cfg["method"] == "eagle3" and cfg["num_speculative_tokens_per_batch_size"] == ranges
    assert cfg["num_speculative_tokens"] == max(k for _, _, k in ranges)
    assert json.loads(line.split("'")[1]) == cfg and any("preset name" in w for w in warnings)
    trt, _, trt_warn = advise.emit("trtllm", sc, ranges, table, best, 256)
    sched = {int(b): k for b, k in trt["draft_len_schedule"].items()}
    assert trt["decoding_type"] == "Eagle3" and sched[1] == trt["max_draft_len"] == ranges[0][2]
    assert all(k <= sched[1] for k in sched.values())  # TensorRT-LLM: nothing drafts more than batch 1
    assert sched == {f: min(k, ranges[0][2]) for f, _, k in advise._merge([[a, b, min(k, ranges[0][2])]
                                                                          for a, b, k in ranges])}
    if max(k for _, _, k in ranges) > ranges[0][2]:
        assert any("caps every draft length" in w for w in trt_warn)
    sgl, flags, sgl_warn = advise.emit("sglang", sc, ranges, table, best, 256)
    assert sgl["speculative_num_draft_tokens"] == sgl["speculative_num_steps"] + 1
    assert "--speculative-num-steps" in flags and any("no batch switch" in w for w in sgl_warn)


def test_advise_cli_json(capsys):
    args = ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
            "eagle3-llama-3.1-8b", "--position-rates", "0.601,0.286,0.128", "--max-num-seqs", "64", "--k-max", "6",
            "--emit", "trtllm", "--json"]
    code, text, err = run(capsys, args)
    assert code == 0, err
    r = json.loads(text)
    assert r["emit"] == "trtllm" and r["ranges"][0]["batches"][0] == 1 and r["ranges"][-1]["batches"][1] == 64
    assert all(x["speedup_min"] >= 1 + r["margin"] - 1e-6 for x in r["ranges"] if x["k"])
    code, _, err = run(capsys, ["advise", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--draft-cost", "0.1",
                                "--alpha", "0.7"])
    assert code == 2 and "has no engine configuration" in err


def test_advise_over_a_request_rate_range(capsys):
    args = ["advise", "--target", "llama-3-70b", "--hardware", "h100-sxm", "--tp", "4", "--drafter", "model", "--draft",
            "qwama-0.5b", "--draft-tp", "1", "--alpha", "0.7", "--qps-max", "20", "--input-len", "220", "--output-len",
            "200", "--json"]
    code, text, err = run(capsys, args)
    assert code == 0, err
    r = json.loads(text)
    top = max(r["served_by_qps"]["batch_base"], r["served_by_qps"]["batch_sd"])
    assert r["ranges"][-1]["batches"][1] == r["max_num_seqs"] == -(-top // 1)  # the batches 20 req/s produces
    assert r["served_by_qps"]["qps"] == 20


def test_advise_names_eagle_heads_by_version():
    """An EAGLE-1/2 head is `EAGLE` in SGLang and `eagle` in vLLM, an EAGLE-3 head `EAGLE3` / `eagle3`."""
    for draft, sgl, vllm in (("eagle-llama-3.1-8b", "EAGLE", "eagle"), ("eagle3-llama-3.1-8b", "EAGLE3", "eagle3")):
        sc = Scenario(engine="roofline",
                      target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft=draft, alpha=0.7)
        assert (advise._method(sc, "sglang"), advise._method(sc, "vllm")) == (sgl, vllm)
