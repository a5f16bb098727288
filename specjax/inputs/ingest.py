"""Engine outputs -> model inputs: acceptance per batch from metrics, logs and iteration stats, and
measured speedups from pairs of benchmark results (`specjax ingest`).

Each format is one `Format` record in `REGISTRY` (name, engine, what it gives, detector, reader, help),
detected from the content when not given; `specjax ingest --format` takes its choices and help from
the registry, so a new format is one `register(Format(...))`. The formats, following the engines' own code:
- `vllm-metrics`: Prometheus text of vLLM V1 (`vllm:spec_decode_num_drafts_total`,
  `..._num_draft_tokens_total`, `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total
  {position="i"}`, `vllm:num_requests_running`). One file is the totals since start; two files are two
  scrapes and give their difference. A scrape without the three counters is refused.
- `vllm-log`: the V1 stat logger's `Engine 000: ... Running: N reqs, ...` line and the `SpecDecoding
  metrics: Mean acceptance length: ..., Accepted: A tokens, Drafted: D tokens, Per-position acceptance
  rate: r_1, ..., r_k, ...` line of the same interval -> (batch N, tau, per-position rates).
- `sglang-log`: `Decode batch. #running-req: N, ... accept len: X, ...` (or `accept-len X`).
- `trtllm-stats`: TensorRT-LLM iteration stats, a JSON list or one JSON object per line
  (`inflightBatchingStats.numGenRequests`, `.numContextRequests`, `specDecodingStats.numDraftTokens`,
  `.numAcceptedTokens`, `.numRequestsWithDraftTokens`, `iterLatencyMS`): tau per batch and the step
  time of decode-only iterations.
- `vllm-bench` (`vllm bench serve --save-result` JSON) and `sglang-bench` (`bench_serving` JSON
  lines): results with an acceptance length are speculative, the others the baseline; each speculative
  result is paired with the baseline of the same `max_concurrency` (closed loop: speedup = output
  throughput ratio at equal concurrency, a row per batch) or `request_rate` (open loop: TPOT ratio at
  equal rate, a row per request rate).

Logs are read line by line (a 1 GB log in bounded memory): samples are summed per batch. Every
malformed line or value is an error naming the file and the line.
"""

import dataclasses
import json
import math
import pathlib
import re
from typing import Protocol

from ..errors import SpecError
from ..cost.acceptance import conditional_rates as conditional

SNIFF_BYTES = 1 << 16
MAX_JSON_BYTES = 256 << 20  # a JSON document read whole (stats as JSON lines have no limit)


@dataclasses.dataclass
class Totals:
    """Counters of one batch size summed over the intervals (or iterations) that ran it."""

    intervals: int = 0
    drafts: float = 0.0          # draft rounds (one per sequence per step)
    accepted: float = 0.0        # accepted draft tokens (the bonus token not included)
    per_pos: list = dataclasses.field(default_factory=list)  # accepted tokens per draft position
    step_s: float = 0.0          # summed step time of decode-only iterations
    steps: int = 0

    def add(self, drafts, accepted, per_pos=None, step_s=None):
        self.intervals += 1
        self.drafts += drafts
        self.accepted += accepted
        if per_pos:
            if len(per_pos) > len(self.per_pos):
                self.per_pos += [0.0] * (len(per_pos) - len(self.per_pos))
            for i, v in enumerate(per_pos):
                self.per_pos[i] += v
        if step_s is not None:
            self.step_s += step_s
            self.steps += 1

    def row(self):
        """The acceptance summary of this batch: tau, k, per-position and conditional rates, step time."""
        rates = [v / self.drafts for v in self.per_pos] if self.drafts and self.per_pos else []
        return dict(intervals=self.intervals, drafts=self.drafts,
                    accepted_length=1.0 + self.accepted / self.drafts if self.drafts else None,
                    k=len(rates) or None, position_rates=_join(rates), acceptance_vector=_join(conditional(rates)),
                    t_sd_step_s=self.step_s / self.steps if self.steps else None)


def _join(values):
    return ",".join(f"{v:.4f}" for v in values) if values else ""


def _lines(path):
    """(line number, text) of a file, streamed (undecodable bytes replaced)."""
    with open(path, "rb") as f:
        for i, raw in enumerate(f, start=1):
            yield i, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _err(path, line, what):
    return SpecError(f"{path} line {line}: {what}")


# ---- vLLM log -------------------------------------------------------------------------------------

_VLLM_RUNNING = re.compile(r"Running: (\d+) reqs")
_VLLM_SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: (?P<tau>[\d.]+|nan), .*?"
                        r"Accepted: (?P<acc>\d+) tokens, Drafted: (?P<dr>\d+) tokens, "
                        r"Per-position acceptance rate: (?P<rates>[\d., ]*?)(?:, Avg Draft|$)")


def vllm_log(path):
    """{batch: Totals} from a vLLM V1 log (see the module docstring)."""
    out, batch = {}, None
    for n, text in _lines(path):
        m = _VLLM_RUNNING.search(text)
        if m:
            batch = int(m[1])
            continue
        if "SpecDecoding metrics:" not in text:
            continue
        m = _VLLM_SPEC.search(text)
        if not m:
            raise _err(path, n, "a SpecDecoding metrics line without 'Mean acceptance length', 'Accepted', "
                                "'Drafted' and 'Per-position acceptance rate' (vLLM V1 format)")
        if batch is None:
            raise _err(path, n, "a SpecDecoding metrics line before any 'Running: N reqs' line (no batch)")
        try:
            rates = [float(v) for v in m["rates"].replace(" ", "").split(",") if v]
        except ValueError:
            raise _err(path, n, f"per-position rates {m['rates']!r}; expected numbers") from None
        drafted, accepted = int(m["dr"]), int(m["acc"])
        if not rates or drafted == 0:
            continue  # an idle interval
        drafts = drafted / len(rates)  # every draft round proposes k tokens
        out.setdefault(batch, Totals()).add(drafts, accepted, [r * drafts for r in rates])
    return out


# ---- SGLang log -----------------------------------------------------------------------------------

_SGL_BATCH = re.compile(r"Decode batch\. #running-req: (\d+)")
_SGL_ACCEPT = re.compile(r"accept[ -]len:? ([\d.]+)")


def sglang_log(path):
    """{batch: Totals} from SGLang's decode log lines: one interval per line, weight 1 (the line gives
    the mean accepted length, not its counts)."""
    out = {}
    for n, text in _lines(path):
        m = _SGL_BATCH.search(text)
        if not m:
            continue
        a = _SGL_ACCEPT.search(text)
        if not a:
            continue  # a line of a run without speculation
        tau = float(a[1])
        if not 1.0 <= tau <= 65.0:
            raise _err(path, n, f"accept len {a[1]}; expected 1 <= accept len <= 65")
        out.setdefault(int(m[1]), Totals()).add(1.0, tau - 1.0)
    return out


# ---- TensorRT-LLM iteration stats -----------------------------------------------------------------

def _json_records(path):
    """(line, object) of one JSON object per line (streamed), or of a JSON document read whole: a list of
    objects or one object (pretty-printed results), when its first line is not JSON on its own."""
    first = next(((n, t) for n, t in _lines(path) if t.strip()), None)
    try:
        json_lines = first is not None and not first[1].lstrip().startswith("[") and json.loads(first[1]) is not None
    except json.JSONDecodeError:
        json_lines = False
    if json_lines:
        for n, text in _lines(path):
            if not text.strip():
                continue
            try:
                yield n, json.loads(text)
            except json.JSONDecodeError as e:
                raise _err(path, n, f"malformed JSON ({e.msg})") from None
        return
    if pathlib.Path(path).stat().st_size > MAX_JSON_BYTES:
        raise SpecError(f"{path}: a JSON document over {MAX_JSON_BYTES >> 20} MB; write one object per line")
    try:
        data = json.loads(pathlib.Path(path).read_text(errors="replace"))
    except json.JSONDecodeError as e:
        raise _err(path, e.lineno, f"malformed JSON ({e.msg})") from None
    for i, obj in enumerate(data if isinstance(data, list) else [data]):
        yield i + 1, obj


def _num(path, line, obj, *keys, optional=False):
    v = obj
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise _err(path, line, f"{'.'.join(keys)} = {v!r}; expected a number >= 0")
    return float(v)


def trtllm_stats(path):
    """{batch: Totals} from TensorRT-LLM iteration stats: per iteration the generation requests, the
    draft rounds and accepted tokens; the iteration time where no context request shared it."""
    out = {}
    for n, obj in _json_records(path):
        if not isinstance(obj, dict) or "specDecodingStats" not in obj:
            raise _err(path, n, "an iteration without specDecodingStats (TensorRT-LLM iteration stats)")
        spec = obj["specDecodingStats"] or {}
        drafts = _num(path, n, spec, "numRequestsWithDraftTokens")
        if drafts == 0:
            continue
        accepted = _num(path, n, spec, "numAcceptedTokens")
        if accepted > _num(path, n, spec, "numDraftTokens"):
            raise _err(path, n, "numAcceptedTokens above numDraftTokens")
        gen = _num(path, n, obj, "inflightBatchingStats", "numGenRequests")
        ctx = _num(path, n, obj, "inflightBatchingStats", "numContextRequests", optional=True) or 0.0
        lat = _num(path, n, obj, "iterLatencyMS", optional=True)
        out.setdefault(int(gen), Totals()).add(drafts, accepted, step_s=lat / 1e3 if lat is not None and ctx == 0
                                                else None)
    return out


# ---- vLLM Prometheus metrics ----------------------------------------------------------------------

_PROM = re.compile(r'^(?P<name>[A-Za-z_:][\w:]*)(?P<labels>\{[^}]*\})?\s+(?P<value>\S+)')
_POSITION = re.compile(r'position="(\d+)"')
COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")


def _scrape(path):
    """Counters of one Prometheus scrape: totals summed over label sets (engines), per position."""
    vals, per_pos, running = {}, {}, None
    for n, text in _lines(path):
        if not text or text.startswith("#"):
            continue
        m = _PROM.match(text)
        if not m:
            raise _err(path, n, "not a Prometheus sample line (name{labels} value)")
        name, labels = m["name"], m["labels"] or ""
        if not name.startswith("vllm:"):
            continue
        try:
            v = float(m["value"])
        except ValueError:
            raise _err(path, n, f"value {m['value']!r}; expected a number") from None
        if not math.isfinite(v) or v < 0:  # counters and the running gauge are finite counts
            raise _err(path, n, f"value {m['value']!r}; expected a finite number >= 0")
        if name in COUNTERS:
            vals[name] = vals.get(name, 0.0) + v
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
            p = _POSITION.search(labels)
            if not p:
                raise _err(path, n, "a per-position counter without position=\"i\"")
            per_pos[int(p[1])] = per_pos.get(int(p[1]), 0.0) + v
        elif name == "vllm:num_requests_running":
            running = (running or 0.0) + v
    missing = [c for c in COUNTERS if c not in vals]
    if missing:
        raise SpecError(f"{path}: a partial scrape: no {missing[0]} (vLLM with speculative decoding exports "
                        f"{', '.join(COUNTERS)})")
    return vals, [per_pos[i] for i in sorted(per_pos)], running


def vllm_metrics(paths):
    """{batch: Totals} from one scrape (totals) or two (their difference); batch = the running requests
    of the last scrape (None when not exported)."""
    if len(paths) > 2:
        raise SpecError(f"vllm-metrics takes one scrape or two (before, after); got {len(paths)} files")
    scrapes = [_scrape(p) for p in paths]
    vals, per_pos, running = scrapes[-1]
    if len(scrapes) == 2:
        before, pos_before, _ = scrapes[0]
        for c in COUNTERS:
            if vals[c] < before[c]:
                raise SpecError(f"{paths[1]}: {c} fell from {before[c]:g} to {vals[c]:g} (the server restarted "
                                "between the scrapes); scrape twice from one run")
        vals = {c: vals[c] - before[c] for c in COUNTERS}
        per_pos = [a - (pos_before[i] if i < len(pos_before) else 0.0) for i, a in enumerate(per_pos)]
    t = Totals()
    if vals[COUNTERS[0]] > 0:
        t.add(vals[COUNTERS[0]], vals[COUNTERS[2]], per_pos)
    return {None if running is None else int(round(running)): t}


# ---- benchmark results ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BenchResult:
    """One benchmark result, in specjax's units."""

    path: str
    line: int
    concurrency: float | None    # max_concurrency (None: unbounded)
    qps: float | None            # request rate (None: all at once)
    output_tok_s: float
    tpot_s: float
    input_len: float
    output_len: float
    accepted_length: float | None
    k: int | None

    @property
    def speculative(self):
        return self.accepted_length is not None and self.accepted_length > 1.0

    @property
    def key(self):
        return (self.concurrency, self.qps)


def _rate(path, line, r):
    """The result's request rate: None for a closed loop ("inf", as the benchmarks write it)."""
    v = r.get("request_rate")
    if v is None or v == "inf" or (isinstance(v, float) and math.isinf(v)):
        return None
    return _num(path, line, r, "request_rate")


def _vllm_bench_acceptance(path, n, r):
    """(accepted length, k) of a `vllm bench serve` result (k from the per-position rates, or from the
    draft counts)."""
    tau = _num(path, n, r, "spec_decode_acceptance_length", optional=True)
    rates = r.get("spec_decode_per_position_acceptance_rates") or []
    if not isinstance(rates, list):
        raise _err(path, n, f"spec_decode_per_position_acceptance_rates = {rates!r}; expected a list")
    k = len(rates) or None
    if k is None and r.get("spec_decode_num_drafts"):
        k = round(_num(path, n, r, "spec_decode_draft_tokens") / _num(path, n, r, "spec_decode_num_drafts"))
    return tau, k


def _sglang_bench_acceptance(path, n, r):
    """(accepted length, None) of an SGLang `bench_serving` result (it carries no draft length)."""
    return _num(path, n, r, "accept_length", optional=True), None


def _results(path, fmt, acceptance_of):
    """`BenchResult`s of one result file; `acceptance_of(path, line, result)` -> (accepted length, k)."""
    out = []
    for n, r in _json_records(path):
        if not isinstance(r, dict):
            raise _err(path, n, "a result that is not a JSON object")
        for key in ("output_throughput", "mean_tpot_ms", "completed", "total_input_tokens", "total_output_tokens"):
            if key not in r:
                raise _err(path, n, f"no {key!r} (a {fmt} result has output_throughput, mean_tpot_ms, completed, "
                                    "total_input_tokens, total_output_tokens)")
        done = _num(path, n, r, "completed")
        if done <= 0:
            raise _err(path, n, "completed = 0; expected a result with finished requests")
        tau, k = acceptance_of(path, n, r)
        conc = _num(path, n, r, "max_concurrency", optional=True)
        out.append(BenchResult(path=str(path), line=n, concurrency=conc,
                               qps=_rate(path, n, r), output_tok_s=_num(path, n, r, "output_throughput"),
                               tpot_s=_num(path, n, r, "mean_tpot_ms") / 1e3,
                               input_len=_num(path, n, r, "total_input_tokens") / done,
                               output_len=_num(path, n, r, "total_output_tokens") / done,
                               accepted_length=tau, k=k))
    return out


def bench_results(path, fmt):
    """`BenchResult`s of one file of a benchmark format (`vllm-bench`, `sglang-bench`)."""
    return get(fmt).read([path])


def pair_results(results):
    """[(baseline, speculative)] matched on (max_concurrency, request_rate). Every speculative result
    needs a baseline of the same load (else an error naming it)."""
    base = {}
    for r in results:
        if not r.speculative:
            if r.key in base:
                raise _err(r.path, r.line, f"a second baseline for max_concurrency={r.concurrency}, request_rate="
                                           f"{r.qps}; expected one per load")
            base[r.key] = r
    pairs = []
    for r in results:
        if r.speculative:
            if r.key not in base:
                raise _err(r.path, r.line, f"a speculative result (accepted length {r.accepted_length:g}) without "
                                           f"a baseline at max_concurrency={r.concurrency}, request_rate={r.qps}")
            pairs.append((base[r.key], r))
    if not pairs:
        raise SpecError("no speculative result with an acceptance length among the files (nothing to compare)")
    return pairs


def measurement_rows(pairs, fmt, target, hardware, drafter, draft=None, tp=1, k=None, weight_dtype="bf16",
                     draft_tp=None):
    """Rows of the measurement schema (`measured.COLUMNS` + engine, and the rate columns) from paired
    results: at a bounded concurrency and no request rate, a row per batch (batch = max_concurrency,
    speedup = output throughput ratio); at a request rate, a row per rate (TPOT ratio)."""
    engine = get(fmt).engine
    rows = []
    for base, sd in pairs:
        kk = sd.k or k
        if kk is None:
            raise _err(sd.path, sd.line, "no draft length in the result; give --k")
        common = dict(series=f"{engine}-{pathlib.Path(sd.path).stem}", target=target, drafter=drafter,
                      draft=draft or "", hardware=hardware, tp=tp, draft_tp=draft_tp or "", k=kk, acceptance_rate="",
                      accepted_length=round(sd.accepted_length, 4), weight_dtype=weight_dtype, approximate=0,
                      source_url=f"file://{pathlib.Path(sd.path).resolve()}", engine=engine)
        if sd.qps is None and sd.concurrency is not None:
            rows.append(dict(common, batch=sd.concurrency, context=round(sd.input_len + sd.output_len / 2, 1),
                             measured_speedup=round(sd.output_tok_s / base.output_tok_s, 5), metric="throughput",
                             qps="", input_len="", output_len="", measured_ratio=""))
        elif sd.qps is not None:
            rows.append(dict(common, batch="", context="", measured_speedup="", metric="tpot", qps=sd.qps,
                             input_len=round(sd.input_len, 1), output_len=round(sd.output_len, 1),
                             measured_ratio=round(base.tpot_s / sd.tpot_s, 5)))
        else:
            raise _err(sd.path, sd.line, "neither max_concurrency nor request_rate: the load is unknown")
    return rows


# ---- the format registry ---------------------------------------------------------------------------

ACCEPTANCE = "acceptance"  # what a format gives: an acceptance summary per batch ...
BENCH = "bench"            # ... or benchmark results, paired into measurement rows
GIVES = {ACCEPTANCE: "acceptance per batch (tau, per-position rates, step time)",
         BENCH: "measurement rows (each speculative result paired with its baseline)"}


class Detector(Protocol):
    def __call__(self, head: str) -> bool:
        """Whether a file whose first 64 KB read `head` is in this format."""


class Reader(Protocol):
    def __call__(self, paths: list) -> list:
        """`ACCEPTANCE`: [(file label, {batch: Totals})]; `BENCH`: [BenchResult] of every file."""


@dataclasses.dataclass(frozen=True)
class Format:
    """One ingest format.

    Attributes:
      name: the value of `--format` (and of the `format` column of an acceptance summary).
      engine: the engine whose output it is (the `engine` column).
      gives: `ACCEPTANCE` or `BENCH`.
      detect: (the first 64 KB of a file, as text) -> whether the file is in this format. Formats are
        tried in registration order; the first that accepts wins.
      read: (paths) -> for `ACCEPTANCE`, [(file label, {batch: Totals})], one group per file or one for
        all of them (two metric scrapes); for `BENCH`, [BenchResult] of every file.
      help: one line for `--help`.
    """

    name: str
    engine: str
    gives: str
    detect: Detector
    read: Reader
    help: str


REGISTRY = {}


def register(fmt):
    """Add an ingest format (replacing one of the same name); returns it."""
    if fmt.gives not in GIVES:
        raise ValueError(f"Format {fmt.name!r}: gives={fmt.gives!r}; expected one of {', '.join(GIVES)}")
    REGISTRY[fmt.name] = fmt
    return fmt


def get(name):
    """The record of format `name`, or a `SpecError` listing the formats."""
    if name not in REGISTRY:
        raise SpecError(f"format {name!r}; expected one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def per_file(reader):
    """An `ACCEPTANCE` reader from a reader of one file (path -> {batch: Totals}): one group per file."""
    return lambda paths: [(str(p), reader(p)) for p in paths]


def _head(path):
    try:
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError as e:
        raise SpecError(f"{path}: cannot read ({e.strerror})") from None


def detect(path):
    """The format of a file from its first 64 KB, or an error listing the formats."""
    head = _head(path)
    found = next((f.name for f in REGISTRY.values() if f.detect(head)), None)
    if found is None:
        raise SpecError(f"{path}: cannot tell the format; give --format {' | '.join(REGISTRY)}")
    return found


def _sglang_bench(head):
    return "mean_tpot_ms" in head and ("mean_e2e_latency_ms" in head or "accept_length" in head)


def _bench(name, acceptance_of):
    return lambda paths: [r for p in paths for r in _results(p, name, acceptance_of)]


register(Format("vllm-metrics", "vllm", ACCEPTANCE,
                lambda head: "vllm:spec_decode_num_drafts" in head or "# TYPE vllm:" in head,
                lambda paths: [(", ".join(map(str, paths)), vllm_metrics(paths))],
                "vLLM Prometheus scrape (one: totals; two: their difference)"))
register(Format("vllm-log", "vllm", ACCEPTANCE, lambda head: "SpecDecoding metrics:" in head, per_file(vllm_log),
                "vLLM V1 log (SpecDecoding metrics lines)"))
register(Format("sglang-log", "sglang", ACCEPTANCE, lambda head: "Decode batch. #running-req" in head,
                per_file(sglang_log), "SGLang decode log lines (accept len)"))
register(Format("trtllm-stats", "trtllm", ACCEPTANCE, lambda head: "specDecodingStats" in head,
                per_file(trtllm_stats), "TensorRT-LLM iteration stats (JSON)"))
register(Format("vllm-bench", "vllm", BENCH, lambda head: "mean_tpot_ms" in head and not _sglang_bench(head),
                _bench("vllm-bench", _vllm_bench_acceptance), "vllm bench serve --save-result JSON"))
register(Format("sglang-bench", "sglang", BENCH, _sglang_bench,
                _bench("sglang-bench", _sglang_bench_acceptance), "SGLang bench_serving results (JSON lines)"))


def acceptance(paths, fmt):
    """Acceptance summary rows (one per file and batch) of files of an `ACCEPTANCE` format."""
    form = get(fmt)
    if form.gives != ACCEPTANCE:
        raise SpecError(f"{fmt} gives {GIVES[form.gives]}, not acceptance per batch")
    rows = []
    for name, by_batch in form.read(paths):
        for b in sorted(by_batch, key=lambda x: -1 if x is None else x):
            row = by_batch[b].row()
            if row["accepted_length"] is None:
                continue
            rows.append(dict(file=name, format=fmt, engine=form.engine, batch=b, **row))
    if not rows:
        raise SpecError(f"{', '.join(map(str, paths))}: no speculative-decoding samples ({fmt})")
    return rows
