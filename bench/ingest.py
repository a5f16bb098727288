"""Ingest of a large engine log, streamed: a synthetic vLLM V1 log of --size-mb MB (default 1024) of
realistic lines (stat-logger and SpecDecoding lines every ten seconds among request logs) is written
to a temporary file and read by `specjax ingest`'s parser; reports MB/s, lines/s and the peak RSS of the
process (bounded: samples are summed per batch, lines are not kept), and checks the sums.

Usage: python bench/ingest.py [--size-mb N]
The last line printed is one JSON object.
"""

import argparse
import json
import os
import pathlib
import resource
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from specjax.inputs import ingest  # noqa: E402

STAT = ("INFO 07-14 10:{m:02d}:{s:02d} [loggers.py:118] Engine 000: Avg prompt throughput: 409.6 tokens/s, Avg "
        "generation throughput: 243.0 tokens/s, Running: {b} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.4%, "
        "Prefix cache hit rate: 12.5%\n")
SPEC = ("INFO 07-14 10:{m:02d}:{s:02d} [metrics.py:86] SpecDecoding metrics: Mean acceptance length: 2.12, Accepted "
        "throughput: 180.00 tokens/s, Drafted throughput: 480.00 tokens/s, Accepted: 1800 tokens, Drafted: 4800 "
        "tokens, Per-position acceptance rate: 0.550, 0.350, 0.225, Avg Draft acceptance rate: 37.5%\n")
REQUEST = ("INFO 07-14 10:{m:02d}:{s:02d} [logger.py:43] Received request cmpl-{i:08x}: prompt: 'Summarize the "
           "following document in three sentences', params: SamplingParams(n=1, temperature=0.0, max_tokens=256)\n")


def write_log(path, size):
    intervals, i = 0, 0
    with open(path, "w") as f:
        while f.tell() < size:
            m, s = divmod(i % 3600, 60)
            for _ in range(20):
                f.write(REQUEST.format(m=m, s=s, i=i))
                i += 1
            f.write(STAT.format(m=m, s=s, b=8 * (1 + intervals % 4)))
            f.write(SPEC.format(m=m, s=s))
            intervals += 1
    return intervals, i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    args = ap.parse_args()
    d = pathlib.Path(tempfile.mkdtemp(prefix="specjax-ingest-"))
    path = d / "vllm.log"
    intervals, requests = write_log(path, args.size_mb << 20)
    size = path.stat().st_size
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    rows = ingest.acceptance([path], "vllm-log")
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    lines = intervals * 22
    assert sum(r["intervals"] for r in rows) == intervals and all(abs(r["accepted_length"] - 2.125) < 1e-9
                                                                  for r in rows)
    os.remove(path)
    d.rmdir()
    print(f"vLLM log {size / 2**20:,.0f} MB, {lines:,} lines ({intervals:,} intervals): {wall:.1f} s, "
          f"{size / 2**20 / wall:,.0f} MB/s, {lines / wall:,.0f} lines/s; peak RSS {peak / 2**20:,.0f} MiB "
          f"(before parsing {rss_before / 2**20:,.0f} MiB)")
    print(json.dumps(dict(bytes=size, lines=lines, intervals=intervals, wall_s=wall, mb_per_s=size / 2**20 / wall,
                          lines_per_s=lines / wall, peak_rss_bytes=peak, rss_before_bytes=rss_before,
                          batches=len(rows))))


if __name__ == "__main__":
    main()
