"""`specjax ingest` on real engine output (tests/data/engine_samples, copied from public issues: see its
PROVENANCE.md), each number derived by hand from the engine's own logging code; the impossible
acceptance it must never write (issue 28); streams, long lines, hostile values and linear time."""

import csv
import json
import math
import os
import pathlib
import re
import threading
import time
import tracemalloc

import pytest

from specjax.cli import main
from specjax.errors import SpecError
from specjax.inputs import ingest, measured

SAMPLES = pathlib.Path(__file__).parent / "data" / "engine_samples"
ENG = pathlib.Path(__file__).parent / "data" / "engines"


def run(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def rows_of(path, fmt="vllm-log"):
    return {r["batch"]: r for r in ingest.acceptance([path], fmt)}


# ---- every sample file: its numbers, or its refusal ---------------------------------------------------

def test_every_sample_is_a_test():
    """Each file in engine_samples is one of the cases below (a new sample without a test fails here)."""
    covered = {"sglang_2025-12_fastrl_pr4.log", "sglang_2026-03_nextn_pr21723.log",
               "trtllm_metrics_1.0rc4_issue6364_verbatim.txt", "vllm_0.9.0.1_ngram_issue19254.log",
               "vllm_2026-05_dflash_aeon7_issue6.log", "vllm_2026-05_gemma4_mtp_issue41789.log",
               "vllm_bench_console_2026-01_pr31739.txt", "vllm_metrics_2026-05_pr41916_truncated.prom",
               "vllm_v0_issue7301.log"}
    assert {p.name for p in SAMPLES.iterdir()} - {"PROVENANCE.md"} == covered
    want = {"sglang": "sglang-log", "trtllm": "trtllm-stats", "vllm_bench_console": "vllm-bench-console",
            "vllm_metrics": "vllm-metrics"}
    for name in covered:
        fmt = next((v for k, v in want.items() if name.startswith(k)), "vllm-log")
        assert ingest.detect(SAMPLES / name) == fmt, name


def test_vllm_0_9_fields_in_their_old_order():
    """vLLM 0.9.0.1 prints `Draft acceptance rate` first. Interval 1 (Running: 337): Drafted 387 over k = 3
    is 129 drafts, 1 + 150 / 129 = 2.163 (printed 2.16); interval 2 (Running: 629): 1488 / 3 = 496 drafts,
    1 + 725 / 496 = 2.462 (printed 2.46). The last stat line has no drafter line after it."""
    rows = rows_of(SAMPLES / "vllm_0.9.0.1_ngram_issue19254.log")
    assert set(rows) == {337, 629}
    assert rows[337]["drafts"] == 129 and rows[337]["accepted_length"] == pytest.approx(1 + 150 / 129)
    assert rows[337]["position_rates"] == "0.5430,0.3570,0.2640" and rows[337]["k"] == 3
    assert rows[629]["drafts"] == 496 and rows[629]["accepted_length"] == pytest.approx(1 + 725 / 496)
    assert rows[629]["acceptance_vector"] == "0.6150,0.7545,0.8254"  # a_i = r_i / r_(i-1)
    assert rows[629]["batch_from"] == "interval"


def test_vllm_2026_container_prefix_two_intervals_of_one_batch():
    """`(APIServer pid=1)` prefixes; two intervals at Running: 3, k = 4: 3652 / 4 = 913 and 1724 / 4 = 431
    drafts, 25 + 15 accepted: tau = 1 + 40 / 1344; position 1 = (0.027 * 913 + 0.035 * 431) / 1344."""
    (row,) = ingest.acceptance([SAMPLES / "vllm_2026-05_gemma4_mtp_issue41789.log"], "vllm-log")
    assert (row["batch"], row["intervals"], row["k"], row["drafts"]) == (3, 2, 4, 913 + 431)
    assert row["accepted_length"] == pytest.approx(1 + 40 / 1344)
    assert row["position_rates"] == f"{(0.027 * 913 + 0.035 * 431) / 1344:.4f},0.0000,0.0000,0.0000"


def test_drafter_line_without_its_stat_line_keeps_the_batch_unknown(tmp_path, capsys):
    """DFlash, k = 15, one SpecDecoding line and no Engine line: 975 / 15 = 65 drafts, 1 + 89 / 65 = 2.369
    (printed 2.37); kept with the batch unknown, and the CSV says so."""
    path = SAMPLES / "vllm_2026-05_dflash_aeon7_issue6.log"
    (row,) = ingest.acceptance([path], "vllm-log")
    assert (row["batch"], row["batch_from"], row["k"], row["drafts"]) == (None, "unknown", 15, 65)
    assert row["accepted_length"] == pytest.approx(1 + 89 / 65)
    assert row["position_rates"].startswith("0.6000,0.3850,0.2150,0.1080,0.0620,0.0000")
    out = tmp_path / "a.csv"
    code, text, err = run(capsys, ["ingest", str(path), "--out", str(out)])
    assert code == 0, err
    assert "batch unknown" in text
    (cells,) = list(csv.DictReader(out.open()))
    assert cells["batch"] == "" and cells["batch_from"] == "unknown"


def test_vllm_v0_totals_since_start():
    """V0 prints totals since start: draft tokens 5 then 15 over k = 5 (1 then 3 rounds), emitted 1 then 3
    (tokens per round, the bonus included): tau = 3 / 3 = 1.0 (system efficiency 1/6 = 0.167 as printed).
    'Accepted tokens' counts accepted positions past a rejection, so it is not used. No stat line: unknown."""
    (row,) = ingest.acceptance([SAMPLES / "vllm_v0_issue7301.log"], "vllm-log")
    assert (row["batch"], row["k"], row["drafts"], row["accepted_length"]) == (None, 5, 3, 1.0)
    assert row["position_rates"] == ""


def test_sglang_samples_old_and_new_punctuation():
    """`Decode batch.` (fastrl, Dec 2025): three lines at 48 running, accept len 1.00 each; `Decode batch,`
    (SGLang main, Mar 2026): 2 running, accept len 2.64. SGLang's accept len is accepted tokens per forward
    pass with the bonus included, so it is tau; it prints no draft length (k empty)."""
    (old,) = ingest.acceptance([SAMPLES / "sglang_2025-12_fastrl_pr4.log"], "sglang-log")
    assert (old["batch"], old["intervals"], old["accepted_length"], old["k"]) == (48, 3, 1.0, None)
    (new,) = ingest.acceptance([SAMPLES / "sglang_2026-03_nextn_pr21723.log"], "sglang-log")
    assert (new["batch"], new["intervals"], new["accepted_length"]) == (2, 1, pytest.approx(2.64))


@pytest.mark.parametrize("name,msg", [
    # the one iteration has "specDecodingStats": null (the server ran without speculation): skipped, not an error
    ("trtllm_metrics_1.0rc4_issue6364_verbatim.txt", "no speculative-decoding samples (trtllm-stats): every "
     "iteration has specDecodingStats null or no drafts (speculation was off)"),
    # the excerpt stops inside the accepted-tokens sample: without it there is no acceptance to give
    ("vllm_metrics_2026-05_pr41916_truncated.prom", "a partial scrape: no vllm:spec_decode_num_accepted_tokens_total"),
    # the excerpt stops at P99 TTFT, before the TPOT section vLLM always prints (and the Speculative Decoding one)
    ("vllm_bench_console_2026-01_pr31739.txt", "line 1: a benchmark report without 'Mean TPOT (ms):'"),
])
def test_samples_refused_with_their_reason(tmp_path, capsys, name, msg):
    code, _, err = run(capsys, ["ingest", str(SAMPLES / name), "--out", str(tmp_path / "o.csv"), "--target",
                                "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle"])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()


# ---- what the logs of today carry -----------------------------------------------------------------------

V1 = ("INFO 06-06 14:20:44 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: {tau}, Accepted: {a} "
      "tokens, Drafted: {d} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 50.0%\n")
STAT = ("INFO 06-06 14:20:44 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 9.0 tokens/s, Running: {b} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%\n")


def test_the_engines_mean_length_where_k_varied(tmp_path):
    """A per-batch k table: 100 rounds of k = 3 and 200 of k = 1 draft 500 tokens in 300 rounds; 300 accepted.
    vLLM prints 1 + 300 / 300 = 2.00; Drafted / k would say 500 / 3 rounds and tau 2.8. The engine's mean
    gives the drafts (300), and the rates (per round) stay as printed."""
    p = tmp_path / "v.log"
    p.write_text(STAT.format(b=8) + V1.format(tau="2.00", a=300, d=500, rates="0.600, 0.250, 0.150"))
    row = rows_of(p)[8]
    assert row["drafts"] == pytest.approx(300) and row["accepted_length"] == pytest.approx(2.0)
    assert row["position_rates"] == "0.6000,0.2500,0.1500"


def test_docker_timestamps_and_a_zero_snapshot(tmp_path):
    """`docker logs -t` prefixes every line; a stat line that says Running: 0 before an interval that drafted
    (the scrape came after the run) gives no batch: the sample is kept with the batch unknown."""
    lines = (SAMPLES / "vllm_2026-05_gemma4_mtp_issue41789.log").read_text().splitlines(keepends=True)
    p = tmp_path / "docker.log"
    p.write_text("".join(f"2026-05-06T06:11:23.{i:09d}Z {t}" for i, t in enumerate(lines)))
    assert ingest.detect(p) == "vllm-log"
    assert rows_of(p)[3]["accepted_length"] == pytest.approx(1 + 40 / 1344)
    z = tmp_path / "zero.log"
    z.write_text(STAT.format(b=0) + V1.format(tau="2.00", a=300, d=900, rates="0.500, 0.300, 0.200"))
    assert set(rows_of(z)) == {None} and rows_of(z)[None]["batch_from"] == "unknown"


def test_trtllm_null_and_zero_draft_iterations_are_skipped(tmp_path):
    base = ingest.acceptance([ENG / "trtllm_stats.jsonl"], "trtllm-stats")
    text = (ENG / "trtllm_stats.jsonl").read_text()
    null = json.loads(text.splitlines()[1])
    zero = dict(null, specDecodingStats=dict(null["specDecodingStats"], numRequestsWithDraftTokens=0))
    p = tmp_path / "t.jsonl"
    p.write_text(text + json.dumps(dict(null, specDecodingStats=None)) + "\n" + json.dumps(zero) + "\n")
    assert ingest.acceptance([p], "trtllm-stats") == [dict(r, file=str(p)) for r in base]


CONSOLE = """Maximum request concurrency: 16
============ Serving Benchmark Result ============
Successful requests:                     100
Benchmark duration (s):                  {dur}
Total input tokens:                      102400
Total generated tokens:                  12800
Request throughput (req/s):              1.00
Output token throughput (tok/s):         {tok}
---------------Time to First Token----------------
Mean TTFT (ms):                          40.00
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          {tpot}
{spec}==================================================
"""
SPEC = """---------------Speculative Decoding---------------
Acceptance rate (%):                     60.00
Acceptance length:                       2.80
Drafts:                                  4571
Draft tokens:                            13713
Accepted tokens:                         8228
Per-position acceptance (%):
  Position 0:                            80.00
  Position 1:                            60.00
  Position 2:                            40.00
"""


def test_vllm_bench_console_pair(tmp_path, capsys):
    """Two console reports as `vllm bench serve` prints them (labels from vllm/benchmarks/serve.py): at
    concurrency 16, 1500 and 2400 output tok/s: speedup 1.6 at batch 16; k = 3 from the three positions."""
    p = tmp_path / "console.txt"
    p.write_text("baseline\n" + CONSOLE.format(dur="100.00", tok="1500.00", tpot="10.00", spec="") + "\nspec\n"
                 + CONSOLE.format(dur="62.50", tok="2400.00", tpot="6.25", spec=SPEC))
    assert ingest.detect(p) == "vllm-bench-console"
    out = tmp_path / "m.csv"
    code, _, err = run(capsys, ["ingest", str(p), "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter",
                                "eagle", "--draft", "eagle3-llama-3.1-8b", "--out", str(out)])
    assert code == 0, err
    (row,) = measured.load(out)
    assert (row.batch, row.k, row.tau, row.metric) == (16.0, 3, 2.8, "throughput")
    assert row.speedup == pytest.approx(2400 / 1500) and row.context == pytest.approx(1024 + 128 / 2)


def test_sglang_bench_console_at_a_rate(tmp_path):
    """SGLang's console (`Backend:`, `Traffic request rate:`, `Accept length:` only when speculative): at
    4 req/s, TPOT 11.00 ms baseline and 6.875 ms speculative: ratio 1.6, a row per rate (give --k)."""
    block = ("============ Serving Benchmark Result ============\nBackend:                                 sglang\n"
             "Traffic request rate:                    4.0\nMax request concurrency:                 not set\n"
             "Successful requests:                     100\nTotal input tokens:                      102400\n"
             "Total generated tokens:                  25600\nOutput token throughput (tok/s):         {tok}\n"
             "{acc}Mean TPOT (ms):                          {tpot}\n" + "=" * 50 + "\n")
    p = tmp_path / "sg.txt"
    p.write_text(block.format(tok="1000.00", acc="", tpot="11.00")
                 + block.format(tok="1000.00", acc="Accept length:                           3.10\n", tpot="6.875"))
    assert ingest.detect(p) == "sglang-bench-console"
    (rate,) = ingest.measurement_rows(ingest.pair_results(ingest.get("sglang-bench-console").read([p])),
                                      "sglang-bench-console", "llama-3.1-8b", "h100-sxm", "eagle",
                                      "eagle3-llama-3.1-8b", k=3)
    assert (rate["qps"], rate["measured_ratio"], rate["accepted_length"], rate["k"]) == (4.0, 1.6, 3.1, 3)
    assert (rate["input_len"], rate["output_len"]) == (1024.0, 256.0)


# ---- issue 28: never impossible acceptance ------------------------------------------------------------

@pytest.mark.parametrize("text,msg", [
    (STAT.format(b=4) + V1.format(tau="2.00", a=700, d=600, rates="0.9, 0.8, 0.7"), "line 2: Accepted 700 above "
     "Drafted 600 tokens"),
    (STAT.format(b=4) + V1.format(tau="5.00", a=300, d=300, rates="1.0, 1.0, 1.0"), "line 2: Mean acceptance length "
     "= '5.00'; expected a number in [1, 4]"),
    (STAT.format(b=4) + V1.format(tau="2.00", a=300, d=900, rates="1.2, 0.5, 0.3"), "line 2: per-position "
     "acceptance rate = '1.2'; expected a number in [0, 1]"),
    (STAT.format(b=4) + V1.format(tau="2.00", a=300, d=900, rates="0.2, 0.5, 0.3"), "line 2, column position_rates: "
     "'0.2,0.5,0.3'; expected non-increasing rates"),
    (STAT.format(b=4) + V1.format(tau="2.00", a=300, d=900, rates="0.9, 0.8, 0.7"), "line 2, column position_rates: "
     "'0.9,0.8,0.7'; expected rates summing to accepted_length - 1"),
    (STAT.format(b=4) + V1.format(tau="nan", a=300, d=900, rates="0.5, 0.3, x"), "line 2: per-position acceptance "
     "rate = 'x'"),
    (STAT.format(b=4) + V1.format(tau="inf", a=300, d=900, rates="0.5, 0.3, 0.2"), "line 2: Mean acceptance length "
     "= 'inf'"),
])
def test_impossible_vllm_lines_are_refused_with_their_line(tmp_path, text, msg):
    p = tmp_path / "bad.log"
    p.write_text(text)
    with pytest.raises(SpecError, match=re.escape(msg)):
        ingest.acceptance([p], "vllm-log")


def test_impossible_scrapes_are_refused(tmp_path):
    before, after = (ENG / "vllm_metrics_before.prom").read_text(), (ENG / "vllm_metrics_after.prom").read_text()
    both = tmp_path / "both.prom"
    both.write_text(before + after)  # two scrapes pasted into one file: never summed
    with pytest.raises(SpecError, match=r"line \d+: vllm:\S+ a second time \(two scrapes in one file\?\)"):
        ingest.acceptance([both], "vllm-metrics")
    gap = tmp_path / "gap.prom"
    gap.write_text("\n".join(t for t in before.splitlines() if 'position="1"' not in t) + "\n")
    with pytest.raises(SpecError, match=re.escape("has positions 0, 2 but not 1; expected positions 0..k-1")):
        ingest.acceptance([gap], "vllm-metrics")
    fell = tmp_path / "fell.prom"  # totals rose, position 2 fell: a restart between the scrapes
    fell.write_text(re.sub(r'(position="2"\}) \S+', r"\1 100.0", after))
    with pytest.raises(SpecError, match=re.escape('position="2"} fell from 300 to 100')):
        ingest.acceptance([ENG / "vllm_metrics_before.prom", fell], "vllm-metrics")
    over = tmp_path / "over.prom"  # more accepted at position 0 than drafts: a rate above 1
    over.write_text(re.sub(r'(position="0"\}) \S+', r"\1 5000.0", before))
    with pytest.raises(SpecError, match="per-position counters sum to"):
        ingest.acceptance([over], "vllm-metrics")


def test_bench_rows_pass_validates_own_row_check(tmp_path, capsys):
    """An accepted length of 5 with k = 3 (above k + 1) is refused at ingest, naming the result's line,
    by the same check `validate` applies (`measured.row_from_cells`)."""
    r = json.loads((ENG / "vllm_bench_eagle3.json").read_text())
    p = tmp_path / "sd.json"
    p.write_text(json.dumps({**r, "spec_decode_acceptance_length": 5.0}))
    code, _, err = run(capsys, ["ingest", str(ENG / "vllm_bench_base.json"), str(p), "--target", "llama-3.1-8b",
                                "--hardware", "h100-sxm", "--drafter", "eagle", "--out", str(tmp_path / "m.csv")])
    assert code == 2 and "sd.json line 1, column accepted_length: '5.0'; expected empty or in [1, k+1 = 4]" in err
    assert not (tmp_path / "m.csv").exists()


# ---- streams, missing files, long lines, hostile values, linear time ----------------------------------

def test_a_pipe_is_read_once_and_whole(tmp_path, capsys):
    """Through a FIFO (what `<(...)` and `/dev/stdin` are), detection must not eat the first 64 KB: a
    300 KB log gives the same rows as the same bytes in a file."""
    text = "".join(STAT.format(b=8 * (1 + i % 2)) + V1.format(tau="2.00", a=300, d=900, rates="0.500, 0.300, 0.200")
                   for i in range(700))
    assert len(text) > 4 * ingest.SNIFF_BYTES
    plain = tmp_path / "plain.log"
    plain.write_text(text)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(text))
    writer.start()
    try:
        code, _, err = run(capsys, ["ingest", str(fifo), "--out", str(tmp_path / "f.csv")])
    finally:
        writer.join(timeout=10)
    assert code == 0, err
    got = list(csv.DictReader((tmp_path / "f.csv").open()))
    want = ingest.acceptance([plain], "vllm-log")
    assert [(int(r["batch"]), int(r["intervals"])) for r in got] == [(r["batch"], r["intervals"]) for r in want]
    assert [r["intervals"] for r in want] == [350, 350]


@pytest.mark.parametrize("make,msg", [(lambda d: d / "missing.log", "missing.log: no such file"),
                                      (lambda d: d, "a directory; expected an engine log")])
def test_missing_file_or_directory_with_format(tmp_path, capsys, make, msg):
    for extra in ([], ["--format", "vllm-log"]):
        code, _, err = run(capsys, ["ingest", str(make(tmp_path)), *extra, "--out", str(tmp_path / "o.csv")])
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err


def test_a_long_line_costs_a_bounded_read(tmp_path):
    """A 5 MB line is refused after reading at most `MAX_LINE` bytes of it (peak memory under its size)."""
    p = tmp_path / "long.log"
    p.write_text("SpecDecoding metrics: " + "x" * (5 << 20) + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match="line 1: a line over 1 MB"):
            ingest.acceptance([p], "vllm-log")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * ingest.MAX_LINE < p.stat().st_size


@pytest.mark.parametrize("fmt,text,msg", [
    ("vllm-log", STAT.format(b="1e400"), "Running = '1e400'"),
    ("vllm-log", STAT.format(b=-3), "Running = '-3'"),
    ("vllm-log", STAT.format(b=2) + V1.format(tau="2.00", a="9" * 5000, d=900, rates="0.5"), "Accepted = '9999"),
    ("vllm-log", STAT.format(b=2) + V1.format(tau="2.00", a=300, d=-900, rates="0.5"), "Drafted = '-900 tokens'"),
    ("vllm-log", "Speculative metrics: Number of speculative tokens: 1e9, Number of draft tokens: 5, Number of "
                 "emitted tokens: 1.\n", "expected 1 <= k <= 64"),
    ("sglang-log", "Decode batch, #running-req: 2, accept len: 1e999,\n", "accept len = '1e999'"),
    ("sglang-log", "Decode batch, #running-req: abc, accept len: 2.0,\n", "#running-req = 'abc'"),
    ("trtllm-stats", '{"iter": 1, "specDecodingStats": {"numRequestsWithDraftTokens": 1' + "0" * 400 + '}}\n',
     "numRequestsWithDraftTokens = 1000"),
    ("trtllm-stats", "[" * 100000 + "]" * 100000 + "\n", "malformed JSON"),
    ("vllm-metrics", 'vllm:spec_decode_num_drafts_total{engine="0"} 1e999\n', "value '1e999'"),
    ("vllm-metrics", 'vllm:spec_decode_num_drafts_total{engine="0" 5\n', "not a Prometheus sample line"),
])
def test_hostile_values_get_one_line(tmp_path, capsys, fmt, text, msg):
    p = tmp_path / "h.txt"
    p.write_text(text)
    code, _, err = run(capsys, ["ingest", str(p), "--format", fmt, "--out", str(tmp_path / "o.csv")])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err


def _cost(path, fmt):
    """The least of three timed reads of one file (a refusal counts: hostile input must fail fast too)."""
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            ingest.acceptance([path], fmt)
        except SpecError:
            pass
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("fmt,unit,lines", [
    ("vllm-log", STAT.format(b=8) + V1.format(tau="2.00", a=300, d=900, rates="0.500, 0.300, 0.200"), True),
    # one line of repeated openings: what made the old lazy pattern quadratic
    ("vllm-log", "SpecDecoding metrics: Mean acceptance length: 1, Accepted: 1 tokens, ", False),
    ("sglang-log", "Decode batch, #running-req: 4, accept len: 2.00, ", False),
    ("vllm-log", "SpecDecoding metrics: Accepted: 1 tokens, Per-position acceptance rate: 0.1, 0.1, 0.1, ", False),
    ("vllm-metrics", 'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} ', False),
])
def test_time_is_linear_in_the_input(tmp_path, fmt, unit, lines):
    """10x the input costs about 10x the time (a quadratic parser: 100x); sizes 90 KB and 900 KB (one line
    stays under `MAX_LINE`), compared loosely so that machine noise cannot fail it."""
    cost = {}
    for size in (90_000, 900_000):
        p = tmp_path / f"{size}.log"
        body = unit * (size // len(unit))
        p.write_text(body if lines else body + "\n")
        cost[size] = _cost(p, fmt)
    assert cost[900_000] < 35 * max(cost[90_000], 1e-4), cost
