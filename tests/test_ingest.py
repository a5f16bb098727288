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

SAMPLE_FORMATS = {  # every file in engine_samples and the format it is detected as
    "sglang_2025-12_fastrl_pr4.log": "sglang-log", "sglang_2026-03_nextn_pr21723.log": "sglang-log",
    "sglang_2026-05_cut_columns_pr25960.log": "sglang-log", "sglang_2026-07_npu_decode_pr608.log": "sglang-log",
    "sglang_bench_console_npu_eagle3_pr17098.txt": "sglang-bench-console",
    "tokenspeed_2026-07_smg_issue1965.log": "sglang-log",
    "trtllm_metrics_1.0rc4_issue6364_verbatim.txt": "trtllm-stats",
    "vllm_0.9.0.1_ngram_issue19254.log": "vllm-log", "vllm_2026-05_dflash_aeon7_issue6.log": "vllm-log",
    "vllm_2026-05_gemma4_mtp_issue41789.log": "vllm-log", "vllm_2026-08_ascend_dspark_issue13640.log": "vllm-log",
    "vllm_bench_console_2026-01_pr31739.txt": "vllm-bench-console",
    "vllm_bench_console_spec_only_2026-08_pr48892.txt": "vllm-bench-console",
    "vllm_metrics_2026-05_pr41916_truncated.prom": "vllm-metrics", "vllm_v0_issue7301.log": "vllm-log"}


def test_every_sample_is_a_test():
    """Each file in engine_samples is one of the cases below (a new sample without a test fails here), named in
    PROVENANCE.md, and detected as the format its engine's code writes."""
    assert {p.name for p in SAMPLES.iterdir()} - {"PROVENANCE.md"} == set(SAMPLE_FORMATS)
    provenance = (SAMPLES / "PROVENANCE.md").read_text()
    for name, fmt in SAMPLE_FORMATS.items():
        assert f"`{name}`" in provenance, name
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


def test_vllm_2026_08_dspark_k7_two_intervals_no_stat_line():
    """vllm-ascend nightly (Aug 2026), DSpark k = 7, two SpecDecoding lines and no Engine line: 161 / 7 = 23 and
    385 / 7 = 55 drafts (1 + 44 / 23 = 2.913, printed 2.91; 1 + 106 / 55 = 2.927, printed 2.93: Drafted / k
    reproduces the engine's mean, so k did not vary); together 1 + 150 / 78 = 2.923, batch unknown. Position 1
    = (0.739 * 23 + 0.691 * 55) / 78."""
    (row,) = ingest.acceptance([SAMPLES / "vllm_2026-08_ascend_dspark_issue13640.log"], "vllm-log")
    assert (row["batch"], row["batch_from"], row["k"], row["intervals"], row["drafts"]) == (None, "unknown", 7, 2, 78)
    assert row["accepted_length"] == pytest.approx(1 + 150 / 78)
    assert row["position_rates"].startswith(f"{(0.739 * 23 + 0.691 * 55) / 78:.4f},")
    assert len(row["position_rates"].split(",")) == 7


def test_sglang_2026_npu_lines_and_a_tokenspeed_fork():
    """sgl-kernel-npu PR 608 (July 2026): `[... TP0 EP0] Decode batch,` lines among Prefill and HTTP lines, one
    interval each: 24 running accept len 3.05, 23 -> 2.63, 22 -> 2.83 (`accept rate` beside them is not used).
    tokenspeed (an SGLang-derived engine, smg issue 1965): `avg_accept_len: 1.90` at 2 running, the bonus
    included (accept_rate 0.30 x k 3 = 0.90 accepted drafts per pass, 1 + 0.90 = 1.90)."""
    rows = rows_of(SAMPLES / "sglang_2026-07_npu_decode_pr608.log", "sglang-log")
    assert {b: (r["intervals"], r["accepted_length"]) for b, r in rows.items()} == {
        24: (1, pytest.approx(3.05)), 23: (1, pytest.approx(2.63)), 22: (1, pytest.approx(2.83))}
    (fork,) = ingest.acceptance([SAMPLES / "tokenspeed_2026-07_smg_issue1965.log"], "sglang-log")
    assert (fork["batch"], fork["accepted_length"], fork["k"]) == (2, pytest.approx(1.90), None)


@pytest.mark.parametrize("name,msg", [
    # the terminal cut the columns: "token usaccept rate: 0.32" lost 'accept len' (SGLang prints it right before
    # 'accept rate'), so the run was speculative and its tau is not in the paste; skipping the line would have said
    # "a run without speculation", which is false
    ("sglang_2026-05_cut_columns_pr25960.log", "line 1: a 'Decode batch' line with 'accept rate' but no 'accept "
     "len' (SGLang prints them together: the line is cut short?)"),
    # the comment pasted only the Speculative Decoding section (tau 1.83, k 1): no load, throughput or baseline to
    # pair, so no measurement row can be made from it
    ("vllm_bench_console_spec_only_2026-08_pr48892.txt", "line 1: a 'Speculative Decoding' section without its "
     "'Serving Benchmark Result' block"),
    # one speculative run (EAGLE3 on NPU, accept length 2.14 at concurrency 8) and no run without speculation
    ("sglang_bench_console_npu_eagle3_pr17098.txt", "line 1: a speculative result (accepted length 2.14) without a "
     "baseline at max_concurrency=8.0, request_rate=None"),
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
    concurrency 16, 1500 and 2400 output tok/s: a throughput ratio of 1.6 at 16 clients; k = 3 from the three
    positions."""
    p = tmp_path / "console.txt"
    p.write_text("baseline\n" + CONSOLE.format(dur="100.00", tok="1500.00", tpot="10.00", spec="") + "\nspec\n"
                 + CONSOLE.format(dur="62.50", tok="2400.00", tpot="6.25", spec=SPEC))
    assert ingest.detect(p) == "vllm-bench-console"
    out = tmp_path / "m.csv"
    code, _, err = run(capsys, ["ingest", str(p), "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter",
                                "eagle", "--draft", "eagle3-llama-3.1-8b", "--out", str(out)])
    assert code == 0, err
    (row,) = measured.load(out)
    assert (row.load_kind, row.concurrency, row.k, row.tau, row.metric) == ("concurrency", 16.0, 3, 2.8, "throughput")
    assert row.speedup == pytest.approx(2400 / 1500) and (row.input_len, row.output_len) == (1024.0, 128.0)


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
    ("sglang-metrics", 'sglang:spec_accept_length{tp_rank="0"} nan\n', "value 'nan'"),
    ("sglang-metrics", 'sglang:num_running_reqs{tp_rank="0"} 4\n', "no sglang:spec_accept_length"),
    ("trtllm-metrics", 'trtllm_spec_decode_drafted_tokens_total{token_position="99999"} 5\n', "without token_position"),
    ("trtllm-metrics", 'trtllm_spec_decode_drafted_tokens_total{token_position="1"} 5\n', "but not 0"),
    ("trtllm-metrics", 'trtllm_speculative_config_info{spec_num_tokens="1e9"} 1\n', "spec_num_tokens = '1e9'"),
    ("vllm-requests", '{"metrics": {"speculative_decoding": {"num_spec_steps": 1' + "0" * 400 + '}}}\n',
     "num_spec_steps = 1000"),
    ("sglang-requests", '{"meta_info": {"spec_verify_ct": true, "completion_tokens": 3}}\n', "spec_verify_ct = True"),
    ("sglang-requests", '[[1, 2]]\n', "a response without meta_info"),
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
    assert cost[900_000] < 60 * max(cost[90_000], 1e-4), cost  # linear: ~10-40x (caches); quadratic: 100x+


# ---- the spec-decode counters the engines added since: SGLang and TensorRT-LLM /metrics -----------------
# SGLang: python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector, sgl-project/sglang main, commit
# 00ae9c1590d2, 2026): Gauge "sglang:spec_accept_length" ("The average acceptance length of speculative
# decoding"), Gauge "sglang:spec_accept_rate", Gauge "sglang:num_running_reqs", labels model_name,
# engine_type, tp_rank, pp_rank (dp_rank with attention DP). TensorRT-LLM: tensorrt_llm/metrics/collector.py
# (MetricsCollector, metric_prefix "trtllm_", NVIDIA/TensorRT-LLM main 2026): Counters
# "trtllm_spec_decode_num_draft_tokens_total" / "..._num_accepted_tokens_total" (log_iteration_stats:
# specDecodingStats.numDraftTokens / numAcceptedTokens), "trtllm_spec_decode_drafted_tokens_total" /
# "trtllm_spec_decode_accepted_tokens_total" with label token_position (0-based, log_request_metrics_dict:
# per-request SPEC_DEC_DRAFTED_PER_POS / ACCEPTED_PER_POS), Gauges "trtllm_spec_decode_acceptance_length",
# "trtllm_num_generation_requests" (inflightBatchingStats.numGenRequests), info gauge
# "trtllm_speculative_config_info" with label spec_num_tokens.

SGL_PROM = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} 16.0
sglang:num_running_reqs{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="1"} 16.0
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} 2.75
sglang:spec_accept_length{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="1"} 2.75
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} 0.583
"""


def test_sglang_scrape_accept_length_gauge(tmp_path):
    """Two TP ranks report the same interval: accept length 2.75 at 16 running requests each; a gauge is a
    mean with no counts, so each label set weighs 1 (like a log line): tau 2.75, batch 16, k unknown."""
    p = tmp_path / "sgl.prom"
    p.write_text(SGL_PROM)
    assert ingest.detect(p) == "sglang-metrics"
    (row,) = ingest.acceptance([p], "sglang-metrics")
    assert (row["batch"], row["batch_from"], row["intervals"], row["k"]) == (16, "scrape", 2, None)
    assert row["accepted_length"] == pytest.approx(2.75) and row["engine"] == "sglang"
    off = tmp_path / "off.prom"  # the gauge's default before any speculative decode (or speculation off)
    off.write_text(SGL_PROM.replace("} 2.75", "} 0.0"))
    with pytest.raises(SpecError, match="sglang:spec_accept_length is 0"):
        ingest.acceptance([off], "sglang-metrics")
    bad = tmp_path / "bad.prom"
    bad.write_text(SGL_PROM.replace("} 2.75", "} 0.5", 1))
    with pytest.raises(SpecError, match=r"line 7: sglang:spec_accept_length = '0.5'; expected a number in \[1, 65\]"):
        ingest.acceptance([bad], "sglang-metrics")
    twice = tmp_path / "twice.prom"
    twice.write_text(SGL_PROM + SGL_PROM)
    with pytest.raises(SpecError, match="a second time"):
        ingest.acceptance([twice], "sglang-metrics")


def _trt(drafted, accepted, gen=24, k=3, totals=None):
    lines = ["# HELP trtllm_speculative_config_info Speculative decoding configuration info",
             "# TYPE trtllm_speculative_config_info gauge",
             f'trtllm_speculative_config_info{{model_name="llama",spec_enabled="True",spec_method="Eagle3",'
             f'spec_num_tokens="{k}"}} 1.0',
             "# TYPE trtllm_num_generation_requests gauge",
             f'trtllm_num_generation_requests{{model_name="llama"}} {gen}']
    for name, vals in (("drafted", drafted), ("accepted", accepted)):
        lines.append(f"# TYPE trtllm_spec_decode_{name}_tokens counter")
        lines += [f'trtllm_spec_decode_{name}_tokens_total{{model_name="llama",token_position="{i}"}} {v}'
                  for i, v in enumerate(vals)]
        lines += [f'trtllm_spec_decode_{name}_tokens_created{{model_name="llama",token_position="{i}"}} 1.78e9'
                  for i in range(len(vals))]
    for name, v in (totals or {}).items():
        lines += [f"# TYPE trtllm_spec_decode_num_{name}_tokens counter",
                  f'trtllm_spec_decode_num_{name}_tokens_total{{model_name="llama"}} {v}']
    return "\n".join(lines) + "\n"


def test_trtllm_scrape_per_position_and_two_scrapes(tmp_path):
    """Per position: 400 rounds drafted at each of 3 positions, 300, 180, 90 accepted: tau = 1 + 570 / 400 =
    2.425, rates 0.75, 0.45, 0.225, batch 24 (numGenRequests of the last iteration). Two scrapes: the
    difference (400 -> 1000 rounds: 600, with 450, 270, 135 accepted more: tau 1 + 855 / 600 = 2.425)."""
    a, b = tmp_path / "a.prom", tmp_path / "b.prom"
    a.write_text(_trt([400, 400, 400], [300, 180, 90]))
    b.write_text(_trt([1000, 1000, 1000], [750, 450, 225], gen=30))
    assert ingest.detect(a) == "trtllm-metrics"
    (row,) = ingest.acceptance([a], "trtllm-metrics")
    assert (row["batch"], row["batch_from"], row["k"], row["drafts"]) == (24, "scrape", 3, 400)
    assert row["accepted_length"] == pytest.approx(1 + 570 / 400) and row["position_rates"] == "0.7500,0.4500,0.2250"
    (d,) = ingest.acceptance([a, b], "trtllm-metrics")
    assert (d["batch"], d["drafts"], d["accepted_length"]) == (30, 600, pytest.approx(1 + 855 / 600))
    with pytest.raises(SpecError, match="fell from 1000 to 400"):
        ingest.acceptance([b, a], "trtllm-metrics")


def test_trtllm_scrape_iteration_counters_need_k(tmp_path):
    """Without per-position counters (return_perf_metrics off): 1200 draft tokens over k = 3 (spec_num_tokens)
    are 400 rounds, 570 accepted: tau 2.425, no rates. Without the config info there is no k: refused."""
    p = tmp_path / "it.prom"
    p.write_text(_trt([], [], totals={"draft": 1200, "accepted": 570}))
    (row,) = ingest.acceptance([p], "trtllm-metrics")
    assert (row["k"], row["drafts"], row["position_rates"]) == (3, 400, "")
    assert row["accepted_length"] == pytest.approx(2.425)
    p.write_text("\n".join(t for t in _trt([], [], totals={"draft": 1200, "accepted": 570}).splitlines()
                           if "config_info" not in t) + "\n")
    with pytest.raises(SpecError, match="needs k: no trtllm_speculative_config_info"):
        ingest.acceptance([p], "trtllm-metrics")


@pytest.mark.parametrize("drafted,accepted,msg", [
    ([400, 400, 400], [300, 350, 90], "non-increasing rates"),  # position 1 accepted more often than 0
    ([400, 400, 400], [500, 180, 90], "above trtllm_spec_decode_drafted_tokens_total = 400"),
    ([400, 400, 400], [300, 180, "inf"], "expected a finite number >= 0"),
])
def test_impossible_trtllm_scrapes_are_refused(tmp_path, capsys, drafted, accepted, msg):
    p = tmp_path / "x.prom"
    p.write_text(_trt(drafted, accepted))
    code, _, err = run(capsys, ["ingest", str(p), "--out", str(tmp_path / "o.csv")])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()


# ---- per-request accepted lengths: SGLang /generate meta_info --------------------------------------------
# SGLang python/sglang/srt/managers/tokenizer_manager.py, `_calculate_spec_decoding_metrics` (main, 2026):
# meta_info["spec_verify_ct"], ["completion_tokens"], ["spec_accept_length"] = completion_tokens /
# spec_verify_ct, ["spec_num_correct_drafts"], ["spec_num_proposed_drafts"] (aliases "spec_accepted_drafts",
# "spec_proposed_drafts"); 2025 releases: "spec_accept_token_num", "spec_draft_token_num"; older ones only
# "spec_verify_ct" and "completion_tokens".

def _sgl_response(rid, verify, out, accepted=None, proposed=None, old=False):
    meta = {"id": rid, "finish_reason": {"type": "length", "length": out}, "prompt_tokens": 20,
            "completion_tokens": out, "cached_tokens": 0, "spec_verify_ct": verify}
    if accepted is not None:
        names = ("spec_accept_token_num", "spec_draft_token_num") if old else ("spec_num_correct_drafts",
                                                                               "spec_num_proposed_drafts")
        meta.update({names[0]: accepted, names[1]: proposed, "spec_accept_length": out / verify})
        if not old:
            meta.update(spec_accepted_drafts=accepted, spec_proposed_drafts=proposed)
    return json.dumps({"text": "...", "meta_info": meta})


def test_sglang_per_request_accepted_lengths(tmp_path, capsys):
    """Request a: 40 verify passes proposing 3 drafts each (120), 66 accepted: tau = 1 + 66 / 40 = 2.65, k 3.
    Request b (2025 names): 20 passes, 60 proposed, 10 accepted: 1.5. Request c (no draft counts: an older
    release): 100 tokens in 50 passes, SGLang's own 100 / 50 = 2.0, k unknown. Request d: done at prefill."""
    p = tmp_path / "responses.jsonl"
    p.write_text("\n".join([_sgl_response("a", 40, 107, 66, 120), _sgl_response("b", 20, 31, 10, 60, old=True),
                            _sgl_response("c", 50, 100), _sgl_response("d", 0, 1)]) + "\n")
    assert ingest.detect(p) == "sglang-requests"
    rows = {r["request_id"]: r for r in ingest.requests([p], "sglang-requests")}
    assert set(rows) == {"a", "b", "c"}
    assert (rows["a"]["accepted_length"], rows["a"]["k"], rows["a"]["verify_steps"]) == (pytest.approx(2.65), 3, 40)
    assert (rows["b"]["accepted_length"], rows["b"]["k"]) == (pytest.approx(1.5), 3)
    assert (rows["c"]["accepted_length"], rows["c"]["k"], rows["c"]["line"]) == (2.0, None, 3)
    out = tmp_path / "req.csv"
    code, text, err = run(capsys, ["ingest", str(p), "--out", str(out)])
    assert code == 0, err
    cells = list(csv.DictReader(out.open()))
    assert [c["request_id"] for c in cells] == ["a", "b", "c"] and cells[0]["k"] == "3"
    assert {"request_id", "accepted_length", "k", "verify_steps", "output_tokens"} <= set(cells[0])
    assert "p50 2.000" in text


@pytest.mark.parametrize("line,msg", [
    (_sgl_response("x", 10, 60, 45, 40), "line 1: spec_num_correct_drafts above spec_num_proposed_drafts"),
    (_sgl_response("x", 10, 60, 45, 45), "spec_num_proposed_drafts / spec_verify_ct = 4.5; expected a whole"),
    (_sgl_response("x", 1, 90), "accepted_length"),                         # 90 tokens per pass, k unknown: > 65
    (_sgl_response("x", 10, 60).replace('"spec_verify_ct": 10', '"spec_verify_ct": -3'), "expected a number >= 0"),
    ('{"text": "hi", "meta_info": {"id": "x", "completion_tokens": 5, "spec_verify_ct": 1e999}}', ">= 0"),
])
def test_impossible_requests_are_refused(tmp_path, capsys, line, msg):
    p = tmp_path / "r.jsonl"
    p.write_text(line + "\n")
    code, _, err = run(capsys, ["ingest", str(p), "--out", str(tmp_path / "o.csv"), "--format", "sglang-requests"])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()


# ---- per-request accepted lengths: vLLM --per-request-spec-decode-metrics -------------------------------
# vLLM PR #48915 (merged Aug 2026; not in 0.28.0, in 0.29.0): `metrics.speculative_decoding` of each response.
# The two objects below are the numbers of the captures pasted in llama-swap issue #1032 (2026-08-21, `summary`,
# vLLM 0.27.2rc1.dev407) and syv-ai/qwen38-27b-rtx3090 issue #66 (2026-09-22, `detailed`, DFlash k = 7).
VLLM_SUMMARY = {"mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.07751937984496124,
                "acceptance_histogram": [39, 1, 0, 3], "num_spec_steps": 43, "num_accepted_draft_tokens": 10,
                "num_draft_tokens": 129, "num_spec_tokens": 3}
VLLM_DETAILED = {"mean_acceptance_length": 6.0909, "draft_acceptance_rate": 0.7273,
                 "acceptance_histogram": [2, 3, 2, 2, 4, 0, 1, 19], "num_spec_steps": 33,
                 "num_accepted_draft_tokens": 168, "num_draft_tokens": 231, "num_spec_tokens": 7}


def _vllm_resp(rid, spec, wrap=False):
    r = {"id": rid, "object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 11742,
         "completion_tokens": 35, "total_tokens": 11777}, "metrics": {"speculative_decoding": spec}}
    return json.dumps({"data": r} if wrap else r)


def test_vllm_per_request_metrics(tmp_path, capsys):
    """summary: 43 steps, 10 accepted: tau = 1 + 10 / 43 = 1.2326 (the engine's 1.2325581...), k 3; the
    histogram [39, 1, 0, 3] gives position 1 accepted in 1 + 0 + 3 = 4 of 43 steps, positions 2 and 3 in 3:
    rates 4/43, 3/43, 3/43 (sum 10/43 = tau - 1). detailed: 33 steps, 168 accepted: 1 + 168 / 33 = 6.0909, k 7.
    A streamed body (`data: ...` lines, chunks before the last without metrics) reads the same."""
    p = tmp_path / "resp.jsonl"
    p.write_text(_vllm_resp("chatcmpl-1", VLLM_SUMMARY, wrap=True) + "\n" + _vllm_resp("chatcmpl-2", VLLM_DETAILED)
                 + "\n")
    assert ingest.detect(p) == "vllm-requests"
    a, b = ingest.requests([p], "vllm-requests")
    assert (a["request_id"], a["k"], a["verify_steps"]) == ("chatcmpl-1", 3, 43)
    assert a["accepted_length"] == pytest.approx(1 + 10 / 43)
    assert a["position_rates"] == f"{4 / 43:.4f},{3 / 43:.4f},{3 / 43:.4f}"
    assert (b["k"], b["accepted_length"]) == (7, pytest.approx(1 + 168 / 33))
    sse = tmp_path / "stream.txt"
    chunk = json.dumps({"id": "chatcmpl-3", "object": "chat.completion.chunk",
                        "choices": [{"delta": {"content": "x"}}]})
    sse.write_text(f"data: {chunk}\n\ndata: {_vllm_resp('chatcmpl-3', VLLM_SUMMARY)}\n\ndata: [DONE]\n")
    (c,) = ingest.requests([sse], "vllm-requests")
    assert (c["request_id"], c["accepted_length"]) == ("chatcmpl-3", pytest.approx(1 + 10 / 43))
    code, text, err = run(capsys, ["ingest", str(p), "--out", str(tmp_path / "r.csv")])
    assert code == 0 and "vllm-requests (vllm): 2 rows" in text, err


@pytest.mark.parametrize("change,msg", [
    (dict(num_accepted_draft_tokens=11), "mean_acceptance_length 1.23256, but 1 + 11 / 43"),
    (dict(acceptance_histogram=[38, 2, 0, 3]), "acceptance_histogram sums to 43 steps and 11 accepted"),
    (dict(acceptance_histogram=[39, 1, 3]), "expected k + 1 = 4 counts"),
    (dict(num_accepted_draft_tokens=200, mean_acceptance_length=None, acceptance_histogram=None,
          num_draft_tokens=None), "accepted_length"),                       # 1 + 200 / 43 = 5.65 > k + 1
    (dict(num_spec_tokens=0), "num_spec_tokens = '0'"),
    (dict(num_spec_steps="43"), "num_spec_steps = '43'; expected a number >= 0"),
])
def test_impossible_vllm_requests_are_refused(tmp_path, capsys, change, msg):
    spec = {key: v for key, v in {**VLLM_SUMMARY, **change}.items() if v is not None}
    p = tmp_path / "r.jsonl"
    p.write_text(_vllm_resp("x", spec) + "\n")
    code, _, err = run(capsys, ["ingest", str(p), "--out", str(tmp_path / "o.csv")])
    assert code == 2 and msg in err and "line 1" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()


# ---- per-request accepted lengths: TensorRT-LLM perf metrics ---------------------------------------------
# The two fixtures are built exactly as the engine writes them (NVIDIA/TensorRT-LLM main, 2026): the body of
# `GET /perf_metrics` (`tensorrt_llm/serve/openai_server.py`, `get_perf_metrics`: a list of {"request_id",
# "perf_metrics": {"first_iter", "last_iter", "timing_metrics", "kv_cache_metrics", "speculative_decoding"}},
# serialized compactly by Starlette's JSONResponse) and the `perf_metrics_output_dir` JSON lines
# (`tensorrt_llm/serve/perf_metrics.py`, `_jsonl_record`: a worker record with "status", and a disaggregated
# record with "ctx_perf_metrics" / "gen_perf_metrics"). `speculative_decoding` appears only where
# total_draft_tokens > 0; acceptance_rate is the float32 accepted / drafted of `LlmRequest::createResult`. The
# numbers are made up; the shapes are the engine's. No real capture was found in public threads.
TRT_PERF = ENG / "trtllm_perf_metrics.json"
TRT_PERF_JSONL = ENG / "trtllm_perf_metrics.jsonl"


def test_trtllm_per_request_perf_metrics(tmp_path, capsys):
    """k = 3 (--k): request 1 drafted 129 = 43 rounds x 3, accepted 10: tau = 1 + 10 / 43; request 2 drafted 131
    (43 full rounds and a last one of 2: ceil(131 / 3) = 44 rounds), accepted 50: 1 + 50 / 44; request 3 has no
    speculative_decoding (no drafts) and is skipped. JSONL: 60 / 3 = 20 rounds, 45 accepted: 3.25; the
    disaggregated record's generation side: 30 / 3 = 10 rounds, 0 accepted: 1.0 (its context side drafts nothing)."""
    assert ingest.detect(TRT_PERF) == ingest.detect(TRT_PERF_JSONL) == "trtllm-requests"
    a, b = ingest.requests([TRT_PERF], "trtllm-requests", k=3)
    assert (a["request_id"], a["verify_steps"], a["k"], a["accepted_length"]) == ("1", 43, 3,
                                                                                 pytest.approx(1 + 10 / 43))
    assert (b["request_id"], b["verify_steps"], b["accepted_length"]) == ("2", 44, pytest.approx(1 + 50 / 44))
    c, d = ingest.requests([TRT_PERF_JSONL], "trtllm-requests", k=3)
    assert (c["request_id"], c["verify_steps"], c["accepted_length"], c["line"]) == ("7", 20, 3.25, 1)
    assert (d["request_id"], d["verify_steps"], d["accepted_length"], d["line"]) == ("9", 10, 1.0, 2)
    out = tmp_path / "r.csv"
    code, text, err = run(capsys, ["ingest", str(TRT_PERF), "--k", "3", "--out", str(out)])
    assert code == 0 and "trtllm-requests (trtllm): 2 rows" in text, err
    # over all verify passes: (10 + 50 + 43 + 44) / (43 + 44) accepted tokens per pass, the bonus included
    assert f"over all verify passes {(10 + 50 + 87) / 87:.3f}" in text
    cells = list(csv.DictReader(out.open()))
    assert [c["accepted_length"][:6] for c in cells] == ["1.2325", "2.1363"] and cells[0]["output_tokens"] == ""


@pytest.mark.parametrize("args,edit,msg", [
    ([], None, "carry no draft length; give --k"),                            # the record has no k
    (["--k", "3", "--tp", "2"], None, "--tp: for benchmark results only; trtllm-requests gives per-request accepted "
                                      "lengths, which takes only --k"),
    (["--k", "3"], ('"total_accepted_draft_tokens":10', '"total_accepted_draft_tokens":11'),
     "acceptance_rate 0.0775194, but 11 / 129 = 0.0852713"),                  # counts of another request
    (["--k", "3"], ('"total_accepted_draft_tokens":10', '"total_accepted_draft_tokens":130'),
     "total_accepted_draft_tokens 130, total_draft_tokens 129; expected whole counts, accepted <= drafted"),
    (["--k", "3"], ('"total_draft_tokens":129', '"total_draft_tokens":"129"'),
     "total_draft_tokens = '129'; expected a number >= 0"),
    (["--k", "3"], ('{"request_id":1,"perf_metrics":', '{"request_id":1,"metrics":'),
     "line 1: a record without perf_metrics"),
    (["--k", "99"], None, "--k 99; expected 1 <= k <= 64"),
])
def test_impossible_trtllm_requests_are_refused(tmp_path, capsys, args, edit, msg):
    p = tmp_path / "perf.json"
    text = TRT_PERF.read_text()
    p.write_text(text.replace(*edit) if edit else text)
    code, _, err = run(capsys, ["ingest", str(p), "--out", str(tmp_path / "o.csv"), *args])
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()
