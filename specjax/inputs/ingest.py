"""Engine outputs -> model inputs: acceptance per batch from metrics, logs and iteration stats, and
measured speedups from pairs of benchmark results (`specjax ingest`).

Each format is one `Format` record in `REGISTRY` (name, engine, what it gives, detector, reader, help),
detected from the content when not given; `specjax ingest --format` takes its choices and help from
the registry, so a new format is one `register(Format(...))`. The formats, following the engines' own code
(the versions and what changed between them: README "Engine integration"):
- `vllm-metrics`: Prometheus text of vLLM V1 (`vllm:spec_decode_num_drafts_total`,
  `..._num_draft_tokens_total`, `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total
  {position="i"}`, `vllm:num_requests_running`). One file is the totals since start; two files are two
  scrapes and give their difference. A scrape without the three counters is refused, and so is a file
  holding one sample twice (two scrapes pasted together), a position missing between others, or a
  counter that fell between two scrapes.
- `vllm-log`: the V1 stat logger's `Engine NNN: ... Running: N reqs, ...` line and the `SpecDecoding
  metrics: ...` line logged right after it for the same interval, its fields in any order (vLLM 0.8-0.9
  print `Draft acceptance rate` first, later versions `Mean acceptance length` first and `Avg Draft
  acceptance rate` last): `Accepted: A tokens`, `Drafted: D tokens`, `Per-position acceptance rate: r_1,
  ..., r_k` and, where printed, `Mean acceptance length: tau` (1 + A / drafts, the engine's own number:
  drafts = D / k where that reproduces tau, else A / (tau - 1), as when k varied with the batch). The V0
  line `Speculative metrics: ... Number of speculative tokens: k, ..., Number of draft tokens: D, Number
  of emitted tokens: E` carries totals since start: each line's difference from the one before gives
  tau = E / (D / k) (emitted tokens per draft round, the bonus included).
- `sglang-log`: `Decode batch. #running-req: N, ... accept len: X, ...` (`Decode batch,` since 2026;
  `accept-len X` or `avg_accept_len: X` in some forks): X is SGLang's accepted tokens per forward pass, bonus
  included. A line with `accept rate` but no `accept len` (cut short in a paste) is refused, not skipped.
- `trtllm-stats`: TensorRT-LLM iteration stats, a JSON list or one JSON object per line
  (`inflightBatchingStats.numGenRequests`, `.numContextRequests`, `specDecodingStats.numDraftTokens`,
  `.numAcceptedTokens`, `.numRequestsWithDraftTokens`, `iterLatencyMS`): tau per batch and the step
  time of decode-only iterations; iterations with `specDecodingStats` null or no drafts are skipped.
- `sglang-metrics`: SGLang `/metrics`: the gauge `sglang:spec_accept_length` per scheduler label set with
  `sglang:num_running_reqs` of the same labels (a gauge: one interval's mean, weight 1, no k).
- `trtllm-metrics`: TensorRT-LLM `/prometheus/metrics` (prefix `trtllm_`): the per-position counters
  `trtllm_spec_decode_drafted_tokens_total` / `..._accepted_tokens_total{token_position="i"}`, else the
  iteration counters `trtllm_spec_decode_num_draft_tokens_total` / `..._num_accepted_tokens_total` with k
  from `trtllm_speculative_config_info{spec_num_tokens}`; batch `trtllm_num_generation_requests`. One
  scrape or two, as `vllm-metrics`.
- `vllm-requests`, `sglang-requests`, `trtllm-requests` (`REQUESTS`: a row per request, not per batch):
  vLLM's `metrics.speculative_decoding` of each response (`--per-request-spec-decode-metrics`), SGLang's
  `meta_info` spec fields of `/generate` responses (`spec_verify_ct` and the accepted/proposed drafts),
  TensorRT-LLM's `perf_metrics.speculative_decoding` of `/perf_metrics` or the perf-metrics JSONL
  (`total_draft_tokens`, `total_accepted_draft_tokens`; k from `--k`).
- `vllm-bench` (`vllm bench serve --save-result` JSON) and `sglang-bench` (`bench_serving` JSON
  lines), and their console reports (`vllm-bench-console`, `sglang-bench-console`: the text block under
  `Serving Benchmark Result`): results with an acceptance length are speculative, the others the
  baseline; each speculative result is paired with the baseline of the same `max_concurrency` (closed
  loop: speedup = output throughput ratio at equal concurrency, a row per batch) or `request_rate`
  (open loop: TPOT ratio at equal rate, a row per request rate).

The batch of an acceptance sample is the interval's own count where the engine prints one (TensorRT-LLM
iterations), else the running requests the engine printed with the interval (a snapshot at its end);
a sample without one (a log that starts mid-stream, a drafter line without its `Engine` line, a
snapshot that says 0 although the interval drafted) is kept with the batch unknown (`batch` empty,
`batch_from` = `unknown`). Every row written passes the checks `specjax validate` applies
(`measured.check_acceptance`, `measured.row_from_cells`), or the file is refused naming the line.

Inputs are read once: a regular file is streamed line by line (a 1 GB log in bounded memory), a pipe or
device (`/dev/stdin`, `<(...)`) is read into memory once (at most `MAX_STREAM_BYTES`) so that format
detection does not consume it. A line over `MAX_LINE` bytes is refused. Lines are split into their
`key: value` fields, never matched by backtracking patterns, so time is linear in the input. Every
malformed line or value is an error naming the file and the line.
"""

import dataclasses
import io
import json
import math
import os
import pathlib
import stat
from typing import Protocol

from ..errors import SpecError
from .. import _lazy

_acceptance = _lazy.module("specjax.cost.acceptance")

SNIFF_BYTES = 1 << 16
MAX_JSON_BYTES = 256 << 20  # a JSON document read whole (stats as JSON lines have no limit)
MAX_STREAM_BYTES = 256 << 20  # a pipe or device, read into memory once
MAX_LINE = 1 << 20  # the longest line read (engine log lines are under a few KB)
K_MAX = 64  # the longest draft a line may carry (the catalogue's k range)
BATCH_FROM = ("iteration", "interval", "scrape", "unknown")  # where a row's batch came from
ROUNDING = 0.005  # the half-unit of a number printed with 2 decimals (vLLM's and SGLang's %.2f)


@dataclasses.dataclass
class Totals:
    """Counters of one batch size summed over the intervals (or iterations) that ran it."""

    intervals: int = 0
    drafts: float = 0.0          # draft rounds (one per sequence per step)
    accepted: float = 0.0        # accepted draft tokens (the bonus token not included)
    per_pos: list = dataclasses.field(default_factory=list)  # accepted tokens per draft position
    step_s: float = 0.0          # summed step time of decode-only iterations
    steps: int = 0
    k: int | None = None         # the longest draft seen (where the format gives it)
    line: int | None = None      # the last line that added to these counters
    batch_from: str = "unknown"  # where the batch came from (`BATCH_FROM`)
    tol: float = 1e-6            # how far the rates may sum from tau - 1 (the rounding of their source)

    def add(self, drafts, accepted, per_pos=None, step_s=None, k=None, line=None):
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
        if k is not None:
            self.k = max(self.k or 0, k)
        if line is not None:
            self.line = line

    def row(self):
        """The acceptance summary of this batch: tau, k, per-position and conditional rates, step time."""
        rates = [v / self.drafts for v in self.per_pos] if self.drafts and self.per_pos else []
        return dict(intervals=self.intervals, drafts=self.drafts,
                    accepted_length=1.0 + self.accepted / self.drafts if self.drafts else None,
                    k=len(rates) or self.k, position_rates=_join(rates),
                    acceptance_vector=_join(_acceptance.conditional_rates(rates)),
                    t_sd_step_s=self.step_s / self.steps if self.steps else None)

    def rates(self):
        return [v / self.drafts for v in self.per_pos] if self.drafts and self.per_pos else []


def _join(values):
    return ",".join(f"{v:.4f}" for v in values) if values else ""


# ---- reading inputs once ---------------------------------------------------------------------------

_STREAMS = {}  # (path, device, inode) -> bytes of a pipe or device already read (it cannot be read twice)


def _stream_key(st, path):
    """A pipe's cache key: its name and the pipe itself (`/dev/stdin` or `/dev/fd/5` of a later pipe in the
    same process is another stream, not the bytes read before)."""
    return str(path), st.st_dev, st.st_ino


def _open(path):
    """A binary file object of `path`: the file itself, or the bytes of a pipe or device read once
    (bounded), so that detection and reading see the same data. One-line errors for a missing file, a
    directory, an unreadable path."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise SpecError(f"{path}: a directory; expected an engine log, metrics, stats or benchmark file")
        if stat.S_ISREG(st.st_mode):
            return open(path, "rb")
        key = _stream_key(st, path)
        if key in _STREAMS:
            return io.BytesIO(_STREAMS[key])
        with open(path, "rb") as f:
            data = f.read(MAX_STREAM_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_STREAM_BYTES:
        raise SpecError(f"{path}: a stream over {MAX_STREAM_BYTES >> 20} MB; write it to a file first")
    _STREAMS[key] = data
    return io.BytesIO(data)


def _size(path):
    st = os.stat(path)
    key = _stream_key(st, path)
    return len(_STREAMS[key]) if key in _STREAMS else st.st_size


def _lines(path):
    """(line number, text) of a file, streamed (undecodable bytes replaced); a line over `MAX_LINE` bytes
    is an error (it is no engine's log line, and reading it whole would cost its size again)."""
    with _open(path) as f:
        n = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                raise _err(path, n, f"a line over {MAX_LINE >> 20} MB; expected engine output (lines of a few KB)")
            yield n, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _err(path, line, what):
    return SpecError(f"{path} line {line}: {what}")


def _float(text):
    """A finite float from text (None when it is not one: non-numeric, inf, nan, beyond float range)."""
    try:
        v = float(text)
    except (ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _value(path, line, field, text, lo=0.0, hi=math.inf, integer=False, unit=""):
    """The number of a log field ("150 tokens", "38.8%", "2.16"), checked to be finite in [lo, hi]."""
    t = text.strip()
    if unit and t.endswith(unit):
        t = t[: -len(unit)].strip()
    v = _float(t)
    if v is None or not lo <= v <= hi or (integer and not v.is_integer()):
        what = "a whole number" if integer else "a number"
        rng = f" in [{lo:g}, {hi:g}]" if math.isfinite(hi) else f" >= {lo:g}"
        raise _err(path, line, f"{field} = {text.strip()[:40]!r}; expected {what}{rng}")
    return v


def _fields(text):
    """{key: value} of a `Key: value, Key: value, ...` list, split (never backtracked): an item without
    ': ' continues the value before it (a list of numbers such as the per-position rates)."""
    out, key = {}, None
    for item in text.split(", "):
        item = item.strip().rstrip(",")  # a line may end in "," (SGLang's `#queue-req: 0,`)
        if not item:
            continue
        k, sep, v = item.partition(": ")
        if sep:
            key = k.strip()
            out[key] = [v.strip()]
        elif key is not None:
            out[key].append(item)  # joined once below: appending to a string here would be quadratic
        else:
            out[item] = [""]
    return {k: ", ".join(v) for k, v in out.items()}


def _rates(path, line, text):
    items = [t for t in text.replace(" ", "").split(",") if t]
    if len(items) > K_MAX:
        raise _err(path, line, f"{len(items)} per-position rates; expected at most k = {K_MAX}")
    return [_value(path, line, "per-position acceptance rate", t, 0.0, 1.0) for t in items]


def _running(path, line, text, marker):
    """The running requests after `marker` ("Running: " in vLLM's stat line): an int >= 0."""
    i = text.find(marker)
    if i < 0:
        return None
    word = text[i + len(marker):].split(" ", 1)[0].rstrip(",")
    return int(_value(path, line, marker.strip().rstrip(":"), word, 0, 1e8, integer=True))


# ---- vLLM log -------------------------------------------------------------------------------------

_V1 = "SpecDecoding metrics:"
_V0 = "Speculative metrics:"


def _v1_interval(path, n, fields):
    """(drafts, accepted, per-position accepted, k) of one V1 `SpecDecoding metrics` line, or None for an
    idle interval."""
    need = ("Accepted", "Drafted", "Per-position acceptance rate")
    missing = [f for f in need if f not in fields]
    if missing:
        raise _err(path, n, f"a SpecDecoding metrics line without {missing[0]!r} (vLLM V1 prints 'Accepted: A "
                            "tokens', 'Drafted: D tokens' and 'Per-position acceptance rate: ...')")
    accepted = _value(path, n, "Accepted", fields["Accepted"], integer=True, unit="tokens")
    drafted = _value(path, n, "Drafted", fields["Drafted"], integer=True, unit="tokens")
    rates = _rates(path, n, fields["Per-position acceptance rate"])
    if drafted == 0 or not rates:
        return None  # an idle interval
    k = len(rates)
    if accepted > drafted:
        raise _err(path, n, f"Accepted {accepted:g} above Drafted {drafted:g} tokens")
    drafts = drafted / k  # every draft round proposes k tokens (when k did not vary)
    mean = fields.get("Mean acceptance length", "nan").strip()
    tau = None if mean == "nan" else _value(path, n, "Mean acceptance length", mean, 1.0, k + 1.0)
    if tau is not None and abs(1 + accepted / drafts - tau) > ROUNDING + 1e-9:
        # k varied within the interval (a per-batch table): the engine's own mean gives the drafts
        drafts = min(max(accepted / max(tau - 1.0, ROUNDING / 2), drafted / k), drafted)
    return drafts, accepted, [r * drafts for r in rates], k


def _v0_interval(path, n, fields, prev):
    """(drafts, accepted, None, k) of one V0 `Speculative metrics` line (totals since start) as the
    difference from `prev`, the totals of the line before (None: the first line, totals since start)."""
    names = {"Number of speculative tokens": "k", "Number of draft tokens": "draft",
             "Number of emitted tokens": "emitted"}
    vals = {}
    for label, key in names.items():
        if label not in fields:
            raise _err(path, n, f"a vLLM V0 'Speculative metrics' line without {label!r}")
        vals[key] = _value(path, n, label, fields[label].rstrip("."), integer=True)
    k = int(vals["k"])
    if not 1 <= k <= K_MAX:
        raise _err(path, n, f"Number of speculative tokens = {k}; expected 1 <= k <= {K_MAX}")
    draft, emitted = vals["draft"], vals["emitted"]
    if prev is not None:
        if draft < prev[0] or emitted < prev[1]:
            raise _err(path, n, "vLLM V0 totals fell from the line before (the server restarted); one run per file")
        draft, emitted = draft - prev[0], emitted - prev[1]
    if draft == 0:
        return None
    rounds = draft / k
    if not rounds.is_integer():
        raise _err(path, n, f"{draft:g} draft tokens is not a multiple of k = {k} (vLLM V0 drafts k per round)")
    if not rounds <= emitted <= rounds * (k + 1):
        raise _err(path, n, f"{emitted:g} emitted tokens in {rounds:g} draft rounds; expected 1 to k+1 = {k + 1} "
                            "per round")
    return rounds, emitted - rounds, None, k


def vllm_log(path):
    """{batch: Totals} from a vLLM log, V1 or V0 (see the module docstring): each drafter line takes the
    batch of the stat line logged just before it for the same interval; without one, the batch is None."""
    out, pending, prev_v0 = {}, None, None
    for n, text in _lines(path):
        if "Running: " in text and ("Engine " in text or "Avg prompt throughput" in text):
            pending = _running(path, n, text, "Running: ")
            continue
        i = text.find(_V1)
        if i >= 0:
            got = _v1_interval(path, n, _fields(text[i + len(_V1):]))
        else:
            i = text.find(_V0)
            if i < 0:
                continue
            fields = _fields(text[i + len(_V0):])
            got = _v0_interval(path, n, fields, prev_v0)
            first = prev_v0 is None
            prev_v0 = (_value(path, n, "draft", fields["Number of draft tokens"].rstrip("."), integer=True),
                       _value(path, n, "emitted", fields["Number of emitted tokens"].rstrip("."), integer=True))
            if first:
                pending = None  # totals since the server started: no one batch ran them
        batch, pending = (pending or None), None  # a snapshot of 0 running requests is no drafting batch
        if got is None:
            continue
        drafts, accepted, per_pos, k = got
        t = out.setdefault(batch, Totals(batch_from="interval" if batch else "unknown",
                                         tol=ROUNDING + 0.0005 * k + 1e-9))
        t.add(drafts, accepted, per_pos, k=k, line=n)
    return out


# ---- SGLang log -----------------------------------------------------------------------------------

_SGL = "Decode batch"


def sglang_log(path):
    """{batch: Totals} from SGLang's decode log lines (`Decode batch.` or `Decode batch,`): one interval
    per line, weight 1 (the line gives the mean accepted length, not its counts)."""
    out = {}
    for n, text in _lines(path):
        i = text.find(_SGL)
        if i < 0 or text[i + len(_SGL): i + len(_SGL) + 1] not in (".", ","):
            continue
        fields = _fields(text[i + len(_SGL) + 1:])
        if "#running-req" not in fields:
            continue
        accept = fields.get("accept len", fields.get("avg_accept_len"))  # `avg_accept_len` (tokenspeed)
        if accept is None and "accept-len " in text:  # the `accept-len X` form
            accept = text[text.find("accept-len ") + len("accept-len "):].split(",", 1)[0]
        if accept is None:
            if "accept rate" in text or "accept_rate" in text:  # printed right after accept len, never alone
                raise _err(path, n, "a 'Decode batch' line with 'accept rate' but no 'accept len' (SGLang prints "
                                    "them together: the line is cut short?)")
            continue  # a line of a run without speculation
        tau = _value(path, n, "accept len", accept, 1.0, 65.0)
        batch = int(_value(path, n, "#running-req", fields["#running-req"], 0, 1e8, integer=True)) or None
        out.setdefault(batch, Totals(batch_from="interval" if batch else "unknown", tol=ROUNDING)).add(
            1.0, tau - 1.0, line=n)
    return out


# ---- TensorRT-LLM iteration stats -----------------------------------------------------------------

def _json_values(path, text, first_line=1):
    """(line, value) of a JSON document: one value, the elements of a top-level list, or values one after
    another, decoded one at a time (memory: the text and one element). A trailing comma after a value is
    accepted (an element pasted from a list)."""
    dec, i, n, line, last = json.JSONDecoder(), 0, len(text), first_line, 0
    ws = " \t\r\n"

    def skip(i):
        while i < n and text[i] in ws:
            i += 1
        return i

    i = skip(i)
    in_list = i < n and text[i] == "["
    if in_list:
        i += 1
    while True:
        i = skip(i)
        if i >= n or (in_list and text[i] == "]"):
            return
        line += text.count("\n", last, i)
        last = i
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise _err(path, first_line - 1 + e.lineno, f"malformed JSON ({e.msg})") from None
        except (ValueError, RecursionError) as e:  # a 5,000-digit integer, 100k nested arrays
            raise _err(path, line, f"malformed JSON ({str(e).splitlines()[0][:80] or 'nested too deep'})") from None
        yield line, obj
        i = skip(i)
        if i < n and text[i] == ",":
            i += 1


def _json_records(path):
    """(line, object) of one JSON object per line (streamed), or of a JSON document read whole: a list of
    objects or one object (pretty-printed results), when its first line is not JSON on its own."""
    with _open(path) as f:
        head = f.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    first = next((t for t in head.splitlines() if t.strip()), "").strip()
    json_lines = False
    if first and not first.startswith("["):
        try:
            json_lines = isinstance(json.loads(first.rstrip(",")), dict)
        except (ValueError, RecursionError):
            json_lines = False
    if json_lines:
        for n, text in _lines(path):
            if not text.strip():
                continue
            yield from _json_values(path, text, n)
        return
    if _size(path) > MAX_JSON_BYTES:
        raise SpecError(f"{path}: a JSON document over {MAX_JSON_BYTES >> 20} MB; write one object per line")
    with _open(path) as f:
        text = f.read().decode("utf-8", errors="replace")
    yield from _json_values(path, text)


def _num(path, line, obj, *keys, optional=False):
    v = obj
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    if v is None and optional:
        return None
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and _float(v) is not None and v >= 0
    if not ok:
        raise _err(path, line, f"{'.'.join(keys)} = {str(v)[:40] if isinstance(v, (int, float)) else repr(v)[:40]}; "
                               "expected a number >= 0")
    return float(v)


def trtllm_stats(path):
    """{batch: Totals} from TensorRT-LLM iteration stats: per iteration the generation requests, the
    draft rounds and accepted tokens; the iteration time where no context request shared it. Iterations
    with `specDecodingStats` null or without drafts (speculation off, a context-only iteration) are skipped."""
    out = {}
    for n, obj in _json_records(path):
        if not isinstance(obj, dict) or not ("specDecodingStats" in obj or "iter" in obj):
            raise _err(path, n, "an object without specDecodingStats or iter (TensorRT-LLM iteration stats)")
        spec = obj.get("specDecodingStats")
        if spec is None:
            continue
        if not isinstance(spec, dict):
            raise _err(path, n, f"specDecodingStats = {str(spec)[:40]!r}; expected an object or null")
        drafts = _num(path, n, spec, "numRequestsWithDraftTokens")
        if drafts == 0:
            continue
        accepted = _num(path, n, spec, "numAcceptedTokens")
        draft_tokens = _num(path, n, spec, "numDraftTokens")
        if accepted > draft_tokens:
            raise _err(path, n, "numAcceptedTokens above numDraftTokens")
        k = math.ceil(draft_tokens / drafts)
        if not 1 <= k <= K_MAX:
            raise _err(path, n, f"numDraftTokens / numRequestsWithDraftTokens = {k}; expected 1 <= k <= {K_MAX}")
        gen = _num(path, n, obj, "inflightBatchingStats", "numGenRequests")
        if gen > 1e8:
            raise _err(path, n, f"inflightBatchingStats.numGenRequests = {gen:g}; expected at most 1e8")
        ctx = _num(path, n, obj, "inflightBatchingStats", "numContextRequests", optional=True) or 0.0
        lat = _num(path, n, obj, "iterLatencyMS", optional=True)
        batch = int(gen) or None
        out.setdefault(batch, Totals(batch_from="iteration" if batch else "unknown")).add(
            drafts, accepted, step_s=lat / 1e3 if lat and ctx == 0 else None, k=k, line=n)
    return out


# ---- vLLM Prometheus metrics ----------------------------------------------------------------------

POS_COUNTER = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")


def _sample(text):
    """(name, labels, value text) of a Prometheus sample line, split (no regular expression), or None."""
    brace = text.find("{")
    space = text.find(" ")
    if brace >= 0 and (space < 0 or brace < space):
        close = text.find("}", brace)
        if close < 0:
            return None
        name, labels, rest = text[:brace], text[brace:close + 1], text[close + 1:]
    else:
        if space < 0:
            return None
        name, labels, rest = text[:space], "", text[space:]
    parts = rest.split()
    if not name or not parts or not (name[0].isalpha() or name[0] in "_:"):
        return None
    return name, labels, parts[0]


def _label(labels, key):
    """The value of label `key` in a `{a="x",b="y"}` label text, or None (split, no regular expression)."""
    for item in labels.strip("{}").split(","):
        k, sep, v = item.partition("=")
        if sep and k.strip() == key:
            return v.strip().strip('"')
    return None


def _position(labels, key="position"):
    word = _label(labels, key)
    if word is None:
        return None
    return int(word) if word.isdigit() and len(word) <= 3 else -1


def _prom_samples(path, prefix):
    """(line, name, labels, value) of each sample of a Prometheus scrape whose name starts with `prefix`:
    values finite and >= 0 (counters and gauges of counts), a sample twice refused (two scrapes pasted
    into one file), a line that is no sample refused."""
    seen = set()
    for n, text in _lines(path):
        if not text.strip() or text.startswith("#"):
            continue
        s = _sample(text.strip())
        if s is None:
            raise _err(path, n, "not a Prometheus sample line (name{labels} value)")
        name, labels, value = s
        if not name.startswith(prefix):
            continue
        v = _float(value)
        if v is None or v < 0:  # counters and the running gauge are finite counts
            raise _err(path, n, f"value {value[:40]!r}; expected a finite number >= 0")
        if (name, labels) in seen:
            raise _err(path, n, f"{name}{labels} a second time (two scrapes in one file?); give each scrape as "
                                "its own file (before, after)")
        seen.add((name, labels))
        yield n, name, labels, v


def _scrape(path):
    """Counters of one Prometheus scrape: totals summed over label sets (engines), per position."""
    vals, per_pos, running = {}, {}, None
    for n, name, labels, v in _prom_samples(path, "vllm:"):
        if name in COUNTERS:
            vals[name] = vals.get(name, 0.0) + v
        elif name == POS_COUNTER:
            p = _position(labels)
            if p is None or p < 0:
                raise _err(path, n, "a per-position counter without position=\"i\" (i = 0, 1, ...)")
            per_pos[p] = per_pos.get(p, 0.0) + v
        elif name == "vllm:num_requests_running":
            running = (running or 0.0) + v
    missing = [c for c in COUNTERS if c not in vals]
    if missing:
        raise SpecError(f"{path}: a partial scrape: no {missing[0]} (vLLM with speculative decoding exports "
                        f"{', '.join(COUNTERS)})")
    if per_pos and sorted(per_pos) != list(range(len(per_pos))):
        gap = next(i for i in range(len(per_pos) + 1) if i not in per_pos)
        raise SpecError(f"{path}: {POS_COUNTER} has positions {', '.join(map(str, sorted(per_pos)))} but not "
                        f"{gap}; expected positions 0..k-1")
    return vals, [per_pos[i] for i in sorted(per_pos)], running


def vllm_metrics(paths):
    """{batch: Totals} from one scrape (totals) or two (their difference); batch = the running requests
    of the last scrape (None when not exported, or 0 although drafts were counted)."""
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
        if pos_before and len(pos_before) != len(per_pos):
            raise SpecError(f"{paths[1]}: {len(per_pos)} draft positions, {paths[0]}: {len(pos_before)}; expected "
                            "two scrapes of one server")
        for i, (a, b) in enumerate(zip(per_pos, pos_before or [0.0] * len(per_pos))):
            if a < b:
                raise SpecError(f"{paths[1]}: {POS_COUNTER}{{position=\"{i}\"}} fell from {b:g} to {a:g} (the "
                                "server restarted between the scrapes); scrape twice from one run")
        vals = {c: vals[c] - before[c] for c in COUNTERS}
        per_pos = [a - b for a, b in zip(per_pos, pos_before or [0.0] * len(per_pos))]
    drafts, draft_tokens, accepted = (vals[c] for c in COUNTERS)
    label = ", ".join(map(str, paths))
    if drafts > 0:
        if accepted > draft_tokens:
            raise SpecError(f"{label}: {accepted:g} accepted tokens above {draft_tokens:g} draft tokens")
        if per_pos and abs(sum(per_pos) - accepted) > 1e-6 * max(accepted, 1.0) + 0.5:
            raise SpecError(f"{label}: the per-position counters sum to {sum(per_pos):g}, the accepted tokens are "
                            f"{accepted:g}; expected one scrape of one server")
    batch = int(round(running)) if running else None
    t = Totals(batch_from="scrape" if batch else "unknown", tol=1e-6)
    if drafts > 0:
        t.add(drafts, accepted, per_pos, k=math.ceil(draft_tokens / drafts))
    return {batch: t}


# ---- SGLang Prometheus metrics --------------------------------------------------------------------

SGL_ACCEPT = "sglang:spec_accept_length"  # a gauge: the scheduler's accept length over its last log interval
SGL_RUNNING = "sglang:num_running_reqs"   # a gauge of the same interval, same labels


def sglang_metrics(path):
    """{batch: Totals} from one SGLang `/metrics` scrape (`python/sglang/srt/metrics/collector.py`,
    `SchedulerMetricsCollector`): per label set (one per scheduler: tp/pp/dp rank) the gauge
    `sglang:spec_accept_length` (accepted tokens per forward pass, the bonus included: the `accept len` of
    the decode log line) with `sglang:num_running_reqs` of the same labels as its batch. A gauge is one
    interval's mean, not counts: each label set weighs 1, like a log line. 0 is the gauge's value before
    any speculative decode (or with speculation off) and is skipped; a value in (0, 1) is refused."""
    accept, running = {}, {}
    for n, name, labels, v in _prom_samples(path, "sglang:"):
        if name == SGL_ACCEPT:
            accept[labels] = (n, v)
        elif name == SGL_RUNNING:
            running[labels] = v
    if not accept:
        raise SpecError(f"{path}: no {SGL_ACCEPT} (SGLang exports it with --enable-metrics; a scrape without it "
                        "is of another engine or cut short)")
    out = {}
    for labels, (n, tau) in accept.items():
        if tau == 0:
            continue
        tau = _value(path, n, SGL_ACCEPT, repr(tau), 1.0, 65.0)
        b = running.get(labels)
        batch = int(b) if b and b.is_integer() and b <= 1e8 else None
        out.setdefault(batch, Totals(batch_from="scrape" if batch else "unknown", tol=1e-6)).add(
            1.0, tau - 1.0, line=n)
    return out


# ---- TensorRT-LLM Prometheus metrics --------------------------------------------------------------

TRT_DRAFTED_POS = "trtllm_spec_decode_drafted_tokens_total"    # {token_position="i"}: per-request perf metrics
TRT_ACCEPTED_POS = "trtllm_spec_decode_accepted_tokens_total"  # {token_position="i"}
TRT_DRAFT = "trtllm_spec_decode_num_draft_tokens_total"        # iteration stats: numDraftTokens summed
TRT_ACCEPTED = "trtllm_spec_decode_num_accepted_tokens_total"  # iteration stats: numAcceptedTokens summed
TRT_CONFIG = "trtllm_speculative_config_info"                  # labels spec_num_tokens (k), spec_method, ...
TRT_GEN = "trtllm_num_generation_requests"                     # gauge: the last iteration's generation requests


def _trt_scrape(path):
    """Counters of one TensorRT-LLM `/prometheus/metrics` scrape, summed over label sets: the per-position
    drafted and accepted tokens, the iteration totals, k from the speculative config info, the last
    iteration's generation requests."""
    drafted, accepted, totals, k, gen = {}, {}, {}, None, None
    for n, name, labels, v in _prom_samples(path, "trtllm_"):
        if name in (TRT_DRAFTED_POS, TRT_ACCEPTED_POS):
            p = _position(labels, "token_position")
            if p is None or p < 0:
                raise _err(path, n, f"{name} without token_position=\"i\" (i = 0, 1, ...)")
            d = drafted if name == TRT_DRAFTED_POS else accepted
            d[p] = d.get(p, 0.0) + v
        elif name in (TRT_DRAFT, TRT_ACCEPTED):
            totals[name] = totals.get(name, 0.0) + v
        elif name == TRT_CONFIG and _label(labels, "spec_num_tokens") not in (None, "", "None"):
            k = int(_value(path, n, "spec_num_tokens", _label(labels, "spec_num_tokens"), 1, K_MAX, integer=True))
        elif name == TRT_GEN:
            gen = (gen or 0.0) + v
    for d, name in ((drafted, TRT_DRAFTED_POS), (accepted, TRT_ACCEPTED_POS)):
        if d and sorted(d) != list(range(len(d))):
            gap = next(i for i in range(len(d) + 1) if i not in d)
            raise SpecError(f"{path}: {name} has token positions {', '.join(map(str, sorted(d)))} but not {gap}; "
                            "expected positions 0..k-1")
    n_pos = max(len(drafted), len(accepted))
    return ([drafted.get(i, 0.0) for i in range(n_pos)], [accepted.get(i, 0.0) for i in range(n_pos)], totals, k,
            gen)


def trtllm_metrics(paths):
    """{batch: Totals} from one TensorRT-LLM scrape (totals since start) or two (their difference). With the
    per-position counters (`return_perf_metrics`): drafts = drafted tokens at position 0 (every draft
    round proposes one), per-position rates = accepted at i / drafts, tau = 1 + their sum. Without them:
    the iteration counters and k from `trtllm_speculative_config_info{spec_num_tokens}`: drafts = draft
    tokens / k (a fixed draft length). Batch = `trtllm_num_generation_requests` of the last scrape."""
    if len(paths) > 2:
        raise SpecError(f"trtllm-metrics takes one scrape or two (before, after); got {len(paths)} files")
    scrapes = [_trt_scrape(p) for p in paths]
    drafted, accepted, totals, k, gen = scrapes[-1]
    label = ", ".join(map(str, paths))
    if len(scrapes) == 2:
        d0, a0, t0, _, _ = scrapes[0]
        for now, before, name in ((drafted, d0, TRT_DRAFTED_POS), (accepted, a0, TRT_ACCEPTED_POS)):
            for i, (a, b) in enumerate(zip(now, before + [0.0] * (len(now) - len(before)))):
                if a < b:
                    raise SpecError(f"{paths[1]}: {name}{{token_position=\"{i}\"}} fell from {b:g} to {a:g} (the "
                                    "server restarted between the scrapes); scrape twice from one run")
            now[:] = [a - b for a, b in zip(now, before + [0.0] * (len(now) - len(before)))]
        for c in totals:
            if totals[c] < t0.get(c, 0.0):
                raise SpecError(f"{paths[1]}: {c} fell from {t0[c]:g} to {totals[c]:g} (the server restarted "
                                "between the scrapes); scrape twice from one run")
            totals[c] -= t0.get(c, 0.0)
    batch = int(round(gen)) if gen else None
    t = Totals(batch_from="scrape" if batch else "unknown", tol=1e-6)
    if drafted:
        for i, (a, d) in enumerate(zip(accepted, drafted)):
            if a > d:
                raise SpecError(f"{label}: {TRT_ACCEPTED_POS}{{token_position=\"{i}\"}} = {a:g} above "
                                f"{TRT_DRAFTED_POS} = {d:g}")
        if drafted[0] > 0:
            t.add(drafted[0], sum(accepted), accepted, k=len(drafted))
        return {batch: t}
    if TRT_DRAFT not in totals or TRT_ACCEPTED not in totals:
        raise SpecError(f"{label}: no TensorRT-LLM speculative counters ({TRT_DRAFTED_POS}, or {TRT_DRAFT} and "
                        f"{TRT_ACCEPTED}); a scrape of trtllm-serve /prometheus/metrics with speculation on")
    if k is None:
        raise SpecError(f"{label}: {TRT_DRAFT} without per-position counters needs k: no {TRT_CONFIG} with "
                        "spec_num_tokens in the scrape (enable return_perf_metrics for the per-position counters)")
    draft_tokens, acc = totals[TRT_DRAFT], totals[TRT_ACCEPTED]
    if acc > draft_tokens:
        raise SpecError(f"{label}: {acc:g} accepted tokens above {draft_tokens:g} draft tokens")
    if draft_tokens > 0:
        t.add(draft_tokens / k, acc, k=k)
    return {batch: t}


# ---- SGLang per-request spec fields ---------------------------------------------------------------

# meta_info of a finished request (SGLang `tokenizer_manager.py`, `_calculate_spec_decoding_metrics`):
# spec_verify_ct (verify passes; every version with a speculative algorithm), completion_tokens, and from
# 2025 the accepted and proposed draft tokens (`spec_accept_token_num` / `spec_draft_token_num`, renamed
# `spec_num_correct_drafts` / `spec_num_proposed_drafts` in 2026 with the old-name aliases
# `spec_accepted_drafts` / `spec_proposed_drafts`)
SGL_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
SGL_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")


def sglang_requests(path):
    """Per-request rows of SGLang `/generate` responses (JSON lines, or a list; a response of a batch is a
    list of them): tau = 1 + accepted drafts / verify passes where the engine counts accepted drafts, else
    SGLang's own `spec_accept_length` = completion_tokens / spec_verify_ct (the prefill's token included);
    k = proposed drafts / verify passes where counted. A request with no verify pass (done at prefill) is
    skipped; each row passes `measured.check_acceptance` or the file is refused naming its line."""
    from . import measured

    rows = []
    for n, obj in _json_records(path):
        for r in obj if isinstance(obj, list) else [obj]:
            meta = r.get("meta_info") if isinstance(r, dict) else None
            if not isinstance(meta, dict):
                raise _err(path, n, "a response without meta_info (SGLang /generate returns text and meta_info)")
            if "spec_verify_ct" not in meta:
                raise _err(path, n, "meta_info without spec_verify_ct (a server without a speculative algorithm)")
            verify = _num(path, n, meta, "spec_verify_ct")
            out_tokens = _num(path, n, meta, "completion_tokens")
            if verify == 0:
                continue
            acc_key = next((key for key in SGL_ACCEPTED if key in meta), None)
            prop_key = next((key for key in SGL_PROPOSED if key in meta), None)
            k = None
            if prop_key is not None:
                per = _num(path, n, meta, prop_key) / verify
                if per:
                    k = int(round(per))
                    if abs(per - k) > 1e-9 or not 1 <= k <= K_MAX:
                        raise _err(path, n, f"{prop_key} / spec_verify_ct = {per:g}; expected a whole draft length "
                                            f"1..{K_MAX} (SGLang proposes k drafts per verify pass)")
            if acc_key is not None:
                acc = _num(path, n, meta, acc_key)
                if prop_key is not None and acc > _num(path, n, meta, prop_key):
                    raise _err(path, n, f"{acc_key} above {prop_key}")
                tau = 1.0 + acc / verify
            else:
                tau = out_tokens / verify
            measured.check_acceptance(path, n, k, tau)
            rid = meta.get("id", r.get("id", ""))
            rows.append(dict(request_id=str(rid), accepted_length=tau, k=k, verify_steps=int(verify),
                             output_tokens=int(out_tokens), position_rates="", line=n))
    return rows


# ---- vLLM per-request spec decode metrics --------------------------------------------------------

# `vllm serve --per-request-spec-decode-metrics summary|detailed` (vLLM PR #48915, merged Aug 2026: not in
# 0.28.0, in 0.29.0): each response carries `metrics.speculative_decoding` with num_spec_steps,
# num_draft_tokens, num_accepted_draft_tokens, num_spec_tokens (k), mean_acceptance_length (1 + accepted /
# steps), draft_acceptance_rate and acceptance_histogram (steps that accepted 0, 1, ..., k drafts);
# `detailed` adds per_step_accepted. The shape is that of responses captured in llama-swap issue #1032 and
# syv-ai/qwen38-27b-rtx3090 issue #66 (vLLM 0.27.2rc1.dev407, 0.29.0).
VLLM_SPEC = "speculative_decoding"


def _vllm_response_objects(path):
    """(line, object) of saved responses: JSON lines, a JSON list, or a streamed body (`data: {...}` lines,
    `data: [DONE]`); a capture wrapping the response as {"data": {...}} is unwrapped."""
    head = _head(path)
    if any(t.strip().startswith("data:") for t in head.splitlines()[:50]):
        for n, text in _lines(path):
            t = text.strip()
            if not t.startswith("data:"):
                continue
            t = t[5:].strip()
            if t == "[DONE]" or not t:
                continue
            yield from _json_values(path, t, n)
        return
    yield from _json_records(path)


def vllm_requests(path):
    """Per-request rows of vLLM responses with `metrics.speculative_decoding` (see `VLLM_SPEC`): tau = 1 +
    num_accepted_draft_tokens / num_spec_steps, k = num_spec_tokens, per-position rates from the acceptance
    histogram (position i accepted in the steps that accepted i or more drafts). The engine's own mean,
    draft count (steps x k) and histogram (summing to the steps and to the accepted drafts) must agree with
    the counts, else the file is refused naming the line; responses without the object (stream chunks
    before the last) are skipped."""
    from . import measured

    rows = []
    for n, obj in _vllm_response_objects(path):
        for r in obj if isinstance(obj, list) else [obj]:
            if isinstance(r, dict) and isinstance(r.get("data"), dict):
                r = r["data"]
            spec = (r.get("metrics") or {}).get(VLLM_SPEC) if isinstance(r, dict) else None
            if spec is None:
                continue
            if not isinstance(spec, dict):
                raise _err(path, n, f"metrics.{VLLM_SPEC} = {str(spec)[:40]!r}; expected an object")
            steps = _num(path, n, spec, "num_spec_steps")
            if steps == 0:
                continue
            acc = _num(path, n, spec, "num_accepted_draft_tokens")
            k = int(_value(path, n, "num_spec_tokens", repr(spec.get("num_spec_tokens")), 1, K_MAX, integer=True))
            drafted = _num(path, n, spec, "num_draft_tokens", optional=True)
            if drafted is not None and acc > drafted:
                raise _err(path, n, f"num_accepted_draft_tokens {acc:g} above num_draft_tokens {drafted:g}")
            tau = 1.0 + acc / steps
            mean = _num(path, n, spec, "mean_acceptance_length", optional=True)
            if mean is not None and abs(mean - tau) > 1e-6 * tau + 5e-5:  # 4-decimal captures allowed
                raise _err(path, n, f"mean_acceptance_length {mean:g}, but 1 + {acc:g} / {steps:g} = {tau:.6g}; "
                                    "expected one request's counts")
            rates = []
            hist = spec.get("acceptance_histogram")
            if hist is not None:
                if not isinstance(hist, list) or len(hist) != k + 1:
                    raise _err(path, n, f"acceptance_histogram = {str(hist)[:40]}; expected k + 1 = {k + 1} counts "
                                        "(steps that accepted 0..k drafts)")
                h = [_num(path, n, {"h": v}, "h") for v in hist]
                if sum(h) != steps or sum(j * c for j, c in enumerate(h)) != acc:
                    raise _err(path, n, f"acceptance_histogram sums to {sum(h):g} steps and "
                                        f"{sum(j * c for j, c in enumerate(h)):g} accepted; the counts say {steps:g} "
                                        f"and {acc:g}")
                rates = [sum(h[i:]) / steps for i in range(1, k + 1)]
            measured.check_acceptance(path, n, k, tau, rates)
            rows.append(dict(request_id=str(r.get("id", "")), accepted_length=tau, k=k, verify_steps=int(steps),
                             output_tokens=int(_num(path, n, r, "usage", "completion_tokens", optional=True) or 0),
                             position_rates=_join(rates), line=n))
    return rows


# ---- TensorRT-LLM per-request perf metrics -------------------------------------------------------

# `trtllm-serve` with `return_perf_metrics: true` keeps each finished request's `RequestPerfMetrics`; they come
# out of `GET /perf_metrics` (a JSON list of {"request_id", "perf_metrics": {...}}, `openai_server.py`,
# `get_perf_metrics`) and, in 2026 builds, of `perf_metrics_output_dir` (JSON lines, `serve/perf_metrics.py`,
# `PerfMetricsJsonlWriter`: the same record with "status", or for disaggregated serving "ctx_perf_metrics" /
# "gen_perf_metrics" records). `perf_metrics.speculative_decoding` is written only when total_draft_tokens > 0:
# {"acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens"}, summed per step by
# `LlmRequest::updateNumTokensPerIteration` (accepted += tokens of the step - 1, drafted += min(draft tokens of
# the step, max draft path length)); acceptance_rate = accepted / drafted (a float32). The PyTorch backend
# left them at 0 until PR 17082 (merged 2026-07-31). No draft length or step count is in the record.
TRT_SPEC_FIELDS = ("acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens")


def _trt_perf_entries(path, n, r):
    """(request id, perf_metrics) of one record: a worker's, or the ctx and gen sides of a disaggregated one."""
    if not isinstance(r, dict):
        raise _err(path, n, "a record that is not a JSON object (trtllm-serve /perf_metrics returns a list of them)")
    out = []
    if "perf_metrics" in r:
        out.append((r.get("request_id"), r["perf_metrics"]))
    for side in ("ctx_perf_metrics", "gen_perf_metrics"):
        if isinstance(r.get(side), dict):
            out.append((r[side].get("request_id"), r[side].get("perf_metrics")))
    if not out:
        raise _err(path, n, "a record without perf_metrics (trtllm-serve /perf_metrics or perf_metrics_output_dir "
                            "writes {\"request_id\", \"perf_metrics\"})")
    for _, pm in out:
        if not isinstance(pm, dict):
            raise _err(path, n, f"perf_metrics = {str(pm)[:40]!r}; expected an object")
    return out


def trtllm_requests(path, k=None):
    """Per-request rows of TensorRT-LLM perf metrics (see `TRT_SPEC_FIELDS`): the record carries the drafted
    and accepted draft tokens but not the draft rounds, so k (`--k`, the served max_draft_len; for trees the
    longest path) gives them: rounds = ceil(total_draft_tokens / k) (every round drafts k, the last may draft
    fewer), tau = 1 + accepted / rounds. With a `draft_len_schedule` k varies and this undercounts the rounds
    (tau too high): give per-request counts of a fixed draft length. The engine's acceptance_rate must equal
    accepted / drafted (float32), else the file is refused naming the line; records without the object (no
    drafts) are skipped."""
    from . import measured

    if k is None:
        raise SpecError(f"{path}: TensorRT-LLM per-request perf metrics carry no draft length; give --k (the "
                        "max_draft_len served): the draft rounds are total_draft_tokens / k")
    if not 1 <= k <= K_MAX:
        raise SpecError(f"--k {k}; expected 1 <= k <= {K_MAX}")
    rows = []
    for n, obj in _json_records(path):
        for r in obj if isinstance(obj, list) else [obj]:
            for rid, pm in _trt_perf_entries(path, n, r):
                spec = pm.get("speculative_decoding")
                if spec is None:
                    continue
                if not isinstance(spec, dict):
                    raise _err(path, n, f"perf_metrics.speculative_decoding = {str(spec)[:40]!r}; expected an object")
                drafted = _num(path, n, spec, "total_draft_tokens")
                acc = _num(path, n, spec, "total_accepted_draft_tokens")
                if drafted == 0:
                    continue
                if acc > drafted or not (acc.is_integer() and drafted.is_integer()):
                    raise _err(path, n, f"total_accepted_draft_tokens {acc:g}, total_draft_tokens {drafted:g}; "
                                        "expected whole counts, accepted <= drafted")
                rate = _num(path, n, spec, "acceptance_rate", optional=True)
                if rate is not None and abs(rate - acc / drafted) > 1e-6:
                    raise _err(path, n, f"acceptance_rate {rate:g}, but {acc:g} / {drafted:g} = {acc / drafted:.6g}; "
                                        "expected one request's counts")
                rounds = math.ceil(drafted / k)
                tau = 1.0 + acc / rounds
                measured.check_acceptance(path, n, k, tau)
                rows.append(dict(request_id=str(rid if rid is not None else ""), accepted_length=tau, k=k,
                                 verify_steps=rounds, output_tokens=None, position_rates="", line=n))
    return rows


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


def _results(path, fmt, acceptance_of, records=None, optional=()):
    """`BenchResult`s of one result file; `acceptance_of(path, line, result)` -> (accepted length, k);
    `records(path)` -> (line, result dict) (default: the file's JSON records)."""
    out = []
    for n, r in (records or _json_records)(path):
        if not isinstance(r, dict):
            raise _err(path, n, "a result that is not a JSON object")
        for key in ("output_throughput", "mean_tpot_ms", "completed", "total_input_tokens", "total_output_tokens"):
            if key not in r and key not in optional:
                raise _err(path, n, f"no {key!r} (a {fmt} result has output_throughput, mean_tpot_ms, completed, "
                                    "total_input_tokens, total_output_tokens)")
        done = _num(path, n, r, "completed")
        if done <= 0:
            raise _err(path, n, "completed = 0; expected a result with finished requests")
        tau, k = acceptance_of(path, n, r)
        conc = _num(path, n, r, "max_concurrency", optional=True)
        out.append(BenchResult(path=str(path), line=n, concurrency=conc,
                               qps=_rate(path, n, r), output_tok_s=_num(path, n, r, "output_throughput"),
                               tpot_s=(_num(path, n, r, "mean_tpot_ms", optional=True) or math.nan) / 1e3,
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
    """Rows of the measurement schema (`measured.COLUMNS` + engine, and the load columns) from paired
    results: at a bounded concurrency and no request rate, a row at that client concurrency (the closed
    loop of docs/model.md §11: output-throughput ratio at equal N, with the mean prompt and output
    lengths, so that prefill of arriving requests is predicted as it ran); at a request rate, a row per
    rate (TPOT ratio)."""
    engine = get(fmt).engine
    rows = []
    for base, sd in pairs:
        if k is not None and sd.k and sd.k != k:  # --k was dropped for the result's own draft length
            raise _err(sd.path, sd.line, f"the result's draft length is {sd.k}, not --k {k}; drop --k (it is for "
                       "results without a draft length)")
        kk = sd.k or k
        if kk is None:
            raise _err(sd.path, sd.line, "no draft length in the result; give --k")
        common = dict(series=f"{engine}-{pathlib.Path(sd.path).stem}", target=target, drafter=drafter,
                      draft=draft or "", hardware=hardware, tp=tp, draft_tp=draft_tp or "", k=kk, acceptance_rate="",
                      accepted_length=round(sd.accepted_length, 4), weight_dtype=weight_dtype, approximate=0,
                      source_url=f"file://{pathlib.Path(sd.path).resolve()}", engine=engine)
        if sd.qps is None and sd.concurrency is not None:
            if not base.output_tok_s > 0:
                raise _err(base.path, base.line, "output throughput 0: no baseline to compare with")
            rows.append(dict(common, batch="", context="", measured_speedup="", metric="throughput", qps="",
                             concurrency=sd.concurrency, input_len=round(sd.input_len, 1),
                             output_len=round(sd.output_len, 1),
                             measured_ratio=round(sd.output_tok_s / base.output_tok_s, 5)))
        elif sd.qps is not None:
            if not (math.isfinite(sd.tpot_s) and math.isfinite(base.tpot_s)):
                bad = sd if not math.isfinite(sd.tpot_s) else base
                raise _err(bad.path, bad.line, "no mean TPOT: a result at a request rate is compared on TPOT")
            rows.append(dict(common, batch="", context="", measured_speedup="", metric="tpot", qps=sd.qps,
                             concurrency="",
                             input_len=round(sd.input_len, 1), output_len=round(sd.output_len, 1),
                             measured_ratio=round(base.tpot_s / sd.tpot_s, 5)))
        else:
            raise _err(sd.path, sd.line, "neither max_concurrency nor request_rate: the load is unknown")
        _check_row(sd, rows[-1])
    return rows


def _check_row(sd, row):
    """The row as `specjax validate` will read it, through validate's own row check: an impossible value
    (an accepted length above k+1, a ratio of 0) refuses the file naming the result's line."""
    from . import hardware, measured, models

    cells = {c: "" if v is None else str(v) for c, v in row.items()}
    measured.row_from_cells(sd.path, sd.line, cells, set(models.preset_slugs()), set(hardware.preset_slugs()))



# ---- benchmark console reports --------------------------------------------------------------------

_HEADER = "Serving Benchmark Result"
_SPEC_SECTION = "Speculative Decoding---"  # vLLM's section title, `{:-^50}` of "Speculative Decoding"
# console label -> the saved result's key (vLLM `vllm bench serve`, SGLang `bench_serving`)
CONSOLE_KEYS = {"Successful requests": "completed", "Maximum request concurrency": "max_concurrency",
                "Max request concurrency": "max_concurrency", "Request rate configured (RPS)": "request_rate",
                "Traffic request rate": "request_rate", "Total input tokens": "total_input_tokens",
                "Total generated tokens": "total_output_tokens", "Output token throughput (tok/s)": "output_throughput",
                "Mean TPOT (ms)": "mean_tpot_ms", "Acceptance length": "spec_decode_acceptance_length",
                "Accept length": "accept_length", "Drafts": "spec_decode_num_drafts",
                "Draft tokens": "spec_decode_draft_tokens"}
CONSOLE_NEEDS = ("Successful requests", "Total input tokens", "Total generated tokens",
                 "Output token throughput (tok/s)")  # and, from vLLM (which always prints it), Mean TPOT (ms)


def _console_value(path, n, label, text):
    t = text.strip()
    if t in ("not set", "None", "inf"):
        return None if t != "inf" else "inf"
    t = t.split("/", 1)[0].strip()  # "32/32" (successful / sent)
    v = _float(t)
    if v is None or v < 0:
        raise _err(path, n, f"{label}: {text.strip()[:40]!r}; expected a number >= 0")
    return v


def _console_records(path, needs=CONSOLE_NEEDS):
    """(line, result dict with the saved result's keys) of each `Serving Benchmark Result` block of a
    console report; lines before a block (vLLM prints the rate and the concurrency there) belong to it."""
    result, header, pending, rates = None, None, {}, None

    def done():
        missing = [lab for lab in needs if CONSOLE_KEYS[lab] not in result]
        if missing:
            raise _err(path, header, f"a benchmark report without {missing[0] + ':'!r} (the report stops before it?); "
                                     f"expected {', '.join(needs)}")
        if rates:
            result["spec_decode_per_position_acceptance_rates"] = rates
        return header, result

    spec_section = None  # the line of a `Speculative Decoding` section title
    for n, text in _lines(path):
        line = text.strip()
        if _SPEC_SECTION in line and spec_section is None:
            spec_section = n
        if _HEADER in line:
            if result is not None:
                yield done()
            result, header, rates = dict(pending), n, None
            pending = {}
            continue
        if line.startswith("=" * 10) and result is not None:  # the block's closing rule
            yield done()
            result = None
            continue
        label, sep, value = line.partition(":")
        if not sep:
            continue
        label = label.strip()
        target = result if result is not None else pending
        if label.startswith("Position ") and rates is not None:
            v = _console_value(path, n, label, value)
            if v is None or v > 100:
                raise _err(path, n, f"{label}: {value.strip()[:40]!r}; expected a percentage in [0, 100]")
            rates.append(v / 100.0)
        elif label == "Per-position acceptance (%)" and result is not None:
            rates = []
        elif label in CONSOLE_KEYS:
            target[CONSOLE_KEYS[label]] = _console_value(path, n, label, value)
    if result is not None:
        yield done()
    elif header is None and spec_section is not None:
        raise _err(path, spec_section, "a 'Speculative Decoding' section without its 'Serving Benchmark Result' block "
                                       "(acceptance without the load, throughput and TPOT it ran at); give the whole "
                                       "console report, and the baseline's")


# ---- the format registry ---------------------------------------------------------------------------

ACCEPTANCE = "acceptance"  # what a format gives: an acceptance summary per batch ...
BENCH = "bench"            # ... or benchmark results, paired into measurement rows ...
REQUESTS = "requests"      # ... or one accepted length per request
GIVES = {ACCEPTANCE: "acceptance per batch (tau, per-position rates, step time)",
         BENCH: "measurement rows (each speculative result paired with its baseline)",
         REQUESTS: "per-request accepted lengths (request_id, accepted_length, k)"}


class Detector(Protocol):
    def __call__(self, head: str) -> bool:
        """Whether a file whose first 64 KB read `head` is in this format."""


class Reader(Protocol):
    def __call__(self, paths: list, **options) -> list:
        """`ACCEPTANCE`: [(file label, {batch: Totals})]; `BENCH`: [BenchResult] of every file; `REQUESTS`:
        [(file label, [row])]. `options`: the `Format.options` flags given."""


@dataclasses.dataclass(frozen=True)
class Format:
    """One ingest format.

    Attributes:
      name: the value of `--format` (and of the `format` column of an acceptance summary).
      engine: the engine whose output it is (the `engine` column).
      gives: `ACCEPTANCE`, `BENCH` or `REQUESTS`.
      detect: (the first 64 KB of a file, as text) -> whether the file is in this format. Formats are
        tried in registration order; the first that accepts wins.
      read: (paths, **options) -> for `ACCEPTANCE`, [(file label, {batch: Totals})], one group per file or
        one for all of them (two metric scrapes); for `BENCH`, [BenchResult] of every file; for `REQUESTS`,
        [(file label, [row])].
      help: one line for `--help`.
      empty: why a file of this format can hold no samples (said when one holds none).
      options: `ingest` flags the reader takes as keyword arguments (`REQUESTS` formats: ("k",) where the
        engine's counts need the draft length); `ingest` refuses the other model flags for them.
    """

    name: str
    engine: str
    gives: str
    detect: Detector
    read: Reader
    help: str
    empty: str = ""  # why a file of this format can hold no samples (said when one holds none)
    options: tuple = ()  # `ingest` flags the reader takes as keywords (e.g. ("k",)); others are refused


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
    with _open(path) as f:
        return f.read(SNIFF_BYTES).decode("utf-8", errors="replace")


def detect(path):
    """The format of a file from its first 64 KB, or an error listing the formats."""
    head = _head(path)
    found = next((f.name for f in REGISTRY.values() if f.detect(head)), None)
    if found is None:
        raise SpecError(f"{path}: cannot tell the format; give --format {' | '.join(REGISTRY)}")
    return found


def check_readable(path):
    """A one-line error for a path that cannot be read (missing, a directory), before any format is tried."""
    _open(path).close()


def _sglang_bench(head):
    return "mean_tpot_ms" in head and ("mean_e2e_latency_ms" in head or "accept_length" in head)


def _bench(name, acceptance_of, records=None, optional=()):
    return lambda paths: [r for p in paths for r in _results(p, name, acceptance_of, records, optional)]


def _vllm_console(path):
    return _console_records(path, CONSOLE_NEEDS + ("Mean TPOT (ms)",))


register(Format("vllm-metrics", "vllm", ACCEPTANCE,
                lambda head: "vllm:spec_decode_num_drafts" in head or "# TYPE vllm:" in head,
                lambda paths: [(", ".join(map(str, paths)), vllm_metrics(paths))],
                "vLLM Prometheus scrape (one: totals; two: their difference)"))
register(Format("sglang-metrics", "sglang", ACCEPTANCE, lambda head: SGL_ACCEPT in head or "# TYPE sglang:" in head,
                per_file(sglang_metrics), "SGLang Prometheus scrape (sglang:spec_accept_length per scheduler)",
                empty="sglang:spec_accept_length is 0 (no speculative decode yet, or speculation off)"))
register(Format("trtllm-metrics", "trtllm", ACCEPTANCE,
                lambda head: "trtllm_spec_decode_" in head or "# TYPE trtllm_" in head,
                lambda paths: [(", ".join(map(str, paths)), trtllm_metrics(paths))],
                "TensorRT-LLM /prometheus/metrics scrape (one: totals; two: their difference)",
                empty="no draft tokens counted (speculation off, or no request finished)"))
register(Format("vllm-log", "vllm", ACCEPTANCE, lambda head: _V1 in head or _V0 in head, per_file(vllm_log),
                "vLLM log (V1 SpecDecoding metrics lines, V0 Speculative metrics lines)"))
register(Format("sglang-log", "sglang", ACCEPTANCE,
                lambda head: "Decode batch. #running-req" in head or "Decode batch, #running-req" in head,
                per_file(sglang_log), "SGLang decode log lines (accept len)",
                empty="no 'Decode batch' line with 'accept len' (a run without speculation)"))
register(Format("trtllm-stats", "trtllm", ACCEPTANCE, lambda head: "specDecodingStats" in head,
                per_file(trtllm_stats), "TensorRT-LLM iteration stats (JSON)",
                empty="every iteration has specDecodingStats null or no drafts (speculation was off)"))
register(Format("trtllm-requests", "trtllm", REQUESTS,
                lambda head: '"perf_metrics"' in head and ('"timing_metrics"' in head
                                                           or '"speculative_decoding"' in head),
                lambda paths, k=None: [(str(p), trtllm_requests(p, k)) for p in paths],
                "TensorRT-LLM per-request perf metrics (/perf_metrics, perf_metrics_output_dir JSONL; needs --k)",
                empty="no request has perf_metrics.speculative_decoding (no drafts; or a PyTorch-backend build before "
                      "PR 17082, July 2026, which left these counters at 0)", options=("k",)))
register(Format("vllm-requests", "vllm", REQUESTS, lambda head: '"speculative_decoding"' in head,
                lambda paths: [(str(p), vllm_requests(p)) for p in paths],
                "vLLM responses with metrics.speculative_decoding (--per-request-spec-decode-metrics)",
                empty="no response with metrics.speculative_decoding and a spec step"))
register(Format("sglang-requests", "sglang", REQUESTS,
                lambda head: '"meta_info"' in head and '"spec_verify_ct"' in head,
                lambda paths: [(str(p), sglang_requests(p)) for p in paths],
                "SGLang /generate responses, per request (meta_info spec_verify_ct)",
                empty="every request finished without a verify pass"))
register(Format("vllm-bench", "vllm", BENCH, lambda head: "mean_tpot_ms" in head and not _sglang_bench(head),
                _bench("vllm-bench", _vllm_bench_acceptance), "vllm bench serve --save-result JSON"))
register(Format("sglang-bench", "sglang", BENCH, _sglang_bench,
                _bench("sglang-bench", _sglang_bench_acceptance), "SGLang bench_serving results (JSON lines)"))
register(Format("vllm-bench-console", "vllm", BENCH,
                lambda head: (_HEADER in head or _SPEC_SECTION in head) and "Backend:" not in head,
                _bench("vllm-bench-console", _vllm_bench_acceptance, _vllm_console),
                "vllm bench serve console report (Serving Benchmark Result blocks)"))
register(Format("sglang-bench-console", "sglang", BENCH, lambda head: _HEADER in head and "Backend:" in head,
                _bench("sglang-bench-console", _sglang_bench_acceptance, _console_records, ("mean_tpot_ms",)),
                "SGLang bench_serving console report (Serving Benchmark Result blocks)"))


def acceptance(paths, fmt):
    """Acceptance summary rows (one per file and batch) of files of an `ACCEPTANCE` format; each row
    passes `measured.check_acceptance` (validate's checks) or the file is refused naming its last line."""
    from . import measured

    form = get(fmt)
    if form.gives != ACCEPTANCE:
        raise SpecError(f"{fmt} gives {GIVES[form.gives]}, not acceptance per batch")
    rows = []
    for name, by_batch in form.read(paths):
        for b in sorted(by_batch, key=lambda x: -1 if x is None else x):
            t = by_batch[b]
            row = t.row()
            if row["accepted_length"] is None:
                continue
            measured.check_acceptance(name, t.line or "-", row["k"], row["accepted_length"], t.rates(), t.tol)
            rows.append(dict(file=name, format=fmt, engine=form.engine, batch=b, batch_from=t.batch_from, **row))
    if not rows:
        why = f": {form.empty}" if form.empty else ""
        raise SpecError(f"{', '.join(map(str, paths))}: no speculative-decoding samples ({fmt}){why}")
    return rows


def requests(paths, fmt, **options):
    """Per-request rows (file, format, engine, request_id, accepted_length, k, verify_steps, output_tokens,
    line) of files of a `REQUESTS` format, each checked by its reader through `measured.check_acceptance`;
    `options`: the format's `Format.options` (e.g. k)."""
    form = get(fmt)
    if form.gives != REQUESTS:
        raise SpecError(f"{fmt} gives {GIVES[form.gives]}, not per-request accepted lengths")
    unknown = sorted(set(options) - set(form.options))
    if unknown:
        raise SpecError(f"{fmt} takes no {', '.join(unknown)}")
    rows = [dict(file=name, format=fmt, engine=form.engine, **r) for name, rs in form.read(paths, **options)
            for r in rs]
    if not rows:
        why = f": {form.empty}" if form.empty else ""
        raise SpecError(f"{', '.join(map(str, paths))}: no speculative-decoding samples ({fmt}){why}")
    return rows
