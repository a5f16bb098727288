"""The advised k per batch range (`advise.schedule`) as the configuration one engine version reads as meant.

Every configuration carries the admission limit (vLLM `max_num_seqs`, SGLang `--max-running-requests`,
TensorRT-LLM `max_batch_size`): the largest batch per engine rank that fits with the drafter, capped by
`--max-num-seqs`, so the table covers every batch the engine admits. `runs` is what the engine will draft
at each batch ([[first, last, k], ...], per engine rank); where it differs from the advice a warning says
why and what it costs. The reading rules followed (tested by re-implementation in tests/test_engine_io.py):

- vLLM (`vllm/v1/spec_decode/dynamic/utils.py`, `build_dynamic_sd_schedule_lookup`, first in 0.24):
  inclusive [first, last, k] ranges starting at 1, a gap or a batch above the last range takes the
  previous k, every k clamped to `num_speculative_tokens`; with `--data-parallel-size > 1` vLLM drops the
  table (`_maybe_disable_dynamic_sd_for_data_parallel`) and runs `num_speculative_tokens` everywhere.
- TensorRT-LLM `draft_len_schedule`: up to 1.2 a key is the first batch of its range (largest key <= batch,
  `bisect_right`; the key 1 must map to `max_draft_len`); from 1.3 a key is the last batch of its range
  (first key >= batch, `bisect_left`), batches above the largest key draft 0, and the smallest key must
  map to `max_draft_len`; no value may exceed it. Plain MTP ignores the schedule (one k); up to 1.2 MTP
  reads `num_nextn_predict_layers`.
- SGLang: one k for every batch, or with `--speculative-adaptive` (EAGLE/EAGLE3/MTP, top-k 1, no attention
  DP) a JSON file of batch-size slots: a batch is padded up to the next CUDA-graph batch size, then takes
  the slot of the largest key <= it; a slot with one candidate step always runs it. The emitted
  `--cuda-graph-bs` holds every range's last batch, so padding never crosses a range boundary.
  `--max-running-requests` counts all attention-DP ranks (the scheduler's `per_dp_max_running_requests`).

A parallel drafter (docs/model.md §5.1) is named by the kind of its config (`PARALLEL`, `parallel_kind`):
- vLLM: PARD as `draft_model` and P-EAGLE as `eagle3`, both with `"parallel_drafting": true` (the
  `SpeculativeConfig` field, first in 0.16, vLLM PR 32887), DFlash as `dflash` (first in 0.20; parallel
  drafting is implied);
- TensorRT-LLM: `decoding_type` `PARD` (`PARDDecodingConfig`) or `DFlash` (`DFlashDecodingConfig`, PR
  12794); no parallel EAGLE head;
- SGLang: `--speculative-algorithm DFLASH` (PR 22077) with `--speculative-dflash-block-size k+1` and
  `--speculative-num-draft-tokens k+1` (SGLang requires the two equal and sets steps and top-k to 1); no
  PARD or P-EAGLE, and no `--speculative-adaptive` for DFLASH.
"""

import json
import re

import numpy as np

from ..errors import SpecError, field_error

ENGINES = ("vllm", "sglang", "trtllm")
# per engine: the oldest version specjax writes for, the default (newest stable checked), feature versions
VERSIONS = {
    "vllm": dict(oldest=(0, 8), default="0.29", table=(0, 24)),
    "trtllm": dict(oldest=(1, 0), default="1.3", schedule=(1, 2), last_keys=(1, 3)),
    "sglang": dict(oldest=(0, 4), default="0.5.20", adaptive=(0, 5, 10)),
}
VERSION_FORM = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?[A-Za-z0-9.]*)?")  # 0.29, v1.3.0rc1, 0.5.20
# a parallel drafter per engine, by the kind of its config: (name, extra keys, first version) or None (not served)
PARALLEL = {
    "vllm": {"model": ("draft_model", {"parallel_drafting": True}, (0, 16)),
             "eagle": ("eagle3", {"parallel_drafting": True}, (0, 16)), "dflash": ("dflash", {}, (0, 20))},
    "trtllm": {"model": ("PARD", {}, None), "eagle": None, "dflash": ("DFlash", {}, None)},
    "sglang": {"model": None, "eagle": None, "dflash": ("DFLASH", {}, None)},
}
ADAPTIVE_FILE = "specjax-adaptive.json"
# a draft-length table over (batch, context): no engine release reads one (the proposals below were open in
# September 2026), so `advise --context ... --context ...` prints it as guidance and emits one batch table
CONTEXT_TABLE = {
    "vllm": "vLLM keys num_speculative_tokens_per_batch_size on the batch size only (a context axis is proposed, "
            "not merged: RFC 48627 with PR 48944's [bs_lo, bs_hi, ctx_lo, ctx_hi, K] entries, PR 54801's "
            "num_speculative_tokens_per_seq_len)",
    "trtllm": "TensorRT-LLM keys draft_len_schedule on the batch size only",
    "sglang": "SGLang keys its adaptive slots on the batch size only (a context axis, ctx_buckets, is proposed in "
              "PR 31716, not merged)",
}
ADMISSION = {"vllm": "max_num_seqs", "trtllm": "max_batch_size", "sglang": "max_running_requests"}
# the engine's name for a drafter kind; an EAGLE head: (EAGLE-1/2 name, EAGLE-3 name)
METHODS = {
    "vllm": {"eagle": ("eagle", "eagle3"), "model": "draft_model", "ngram": "ngram", "mtp": "mtp"},
    "trtllm": {"eagle": ("Eagle", "Eagle3"), "model": "DraftTarget", "ngram": "NGram", "mtp": "MTP"},
    "sglang": {"eagle": ("EAGLE", "EAGLE3"), "model": "STANDALONE", "ngram": "NGRAM", "mtp": "EAGLE"},
}


def parse_version(engine, text):
    """'0.29' / '1.3.0rc1' -> (0, 29) / (1, 3, 0): the numeric prefix, checked against the oldest supported."""
    v = VERSIONS[engine]
    text = v["default"] if text is None else str(text).strip()
    m = VERSION_FORM.fullmatch(text)
    oldest = ".".join(map(str, v["oldest"]))
    if not m:
        raise field_error("engine_version", text, f"a {engine} version like {v['default']} (>= {oldest})")
    parts = tuple(int(p) for p in m.groups() if p is not None)
    if parts < v["oldest"]:
        raise field_error("engine_version", text, f"{engine} >= {oldest} (older releases have no speculative "
                          "configuration specjax writes)")
    return parts


def _dot(v):
    return ".".join(map(str, v))


def parallel_kind(scenario):
    """"dflash", "eagle" (P-EAGLE) or "model" (PARD): the config behind a parallel drafter."""
    from ..inputs import models

    arch = models.load_architecture(scenario.draft)
    return "dflash" if arch.dflash_features else ("eagle" if arch.eagle_version else "model")


def parallel(scenario, engine):
    """(name, extra configuration keys, first version or None) of the scenario's parallel drafter in the engine;
    a one-line `SpecError` where the engine has none of its kind."""
    kind = parallel_kind(scenario)
    found = PARALLEL[engine][kind]
    if found is None:
        what = {"eagle": "parallel EAGLE head (P-EAGLE)", "model": "parallel draft model (PARD)"}[kind]
        served = [e for e, table in PARALLEL.items() if table[kind]]
        raise SpecError(f"emit={engine!r} serves no {what} (draft={scenario.draft!r}); expected emit= one of "
                        f"{', '.join(served)}")
    return found


def _at_least(out, v, first, what):
    """Raise the configuration's minimum engine version to `first` (a tuple) where that is newer; a warning where
    the version written for (`v`) is older than that."""
    have = tuple(int(x) for x in out["engine_version"]["minimum"].split("."))
    if first and first > have:
        out["engine_version"]["minimum"] = _dot(first)
    if first and v < first:
        out["warnings"].append(f"{what} is first in {_dot(first)}; {_dot(v)} does not read it")


def method(scenario, engine):
    """The engine's name for the scenario's drafter (EAGLE-3 heads told apart by their config; a parallel
    drafter by the kind of its config, `parallel`)."""
    from ..inputs import models

    if scenario.drafter == "parallel":
        return parallel(scenario, engine)[0]
    names = METHODS[engine]
    if scenario.drafter not in names:
        raise SpecError(f"drafter={scenario.drafter!r} has no engine configuration (an abstract cost-ratio or "
                        f"self-speculation drafter); expected one of {', '.join(names)}")
    name = names[scenario.drafter]
    if isinstance(name, tuple):
        name = name[models.load_architecture(scenario.draft).eagle_version == 3]
    return name


def draft_name(scenario, draft_id=None):
    """(what the engine loads as the drafter, a warning or None): `--draft-id`, else the Hugging Face id of
    the draft preset, else the path given; MTP and n-gram drafters load nothing of their own."""
    from ..inputs import models

    if scenario.drafter in ("mtp", "ngram"):
        return None, None
    if draft_id:
        return draft_id, None
    d = scenario.draft
    if d in models.preset_slugs():
        url = models.preset_info(d).get("canonical_url") or ""
        m = re.match(r"https://huggingface\.co/([^/]+/[^/]+)", url)
        if m:
            return m.group(1), None
        return d, (f"the draft preset {d!r} has no Hugging Face id: give --draft-id with the id or directory the "
                   "engine loads")
    return d, (f"draft {d!r} is a local config: the engine loads a model directory or Hugging Face id; give "
               "--draft-id (the emitted configuration names the config file as given)")


def merge(ranges):
    """Neighbouring ranges with the same k as one."""
    out = []
    for first, last, k in ranges:
        if out and out[-1][2] == k:
            out[-1][1] = last
        else:
            out.append([first, last, k])
    return out


def per_batch(ranges):
    """[k at batch 1, k at batch 2, ...] from [[first, last, k], ...]."""
    return [k for first, last, k in ranges for _ in range(first, last + 1)]


def single_k(table, margin):
    """The one k with the best geometric-mean speedup over the served batches (0 where it does not pay by
    the margin), and that mean."""
    with np.errstate(invalid="ignore", divide="ignore"):
        logs = np.nanmean(np.log(table), axis=0)
    if not np.isfinite(logs).any():
        return 0, 1.0
    k = int(np.nanargmax(logs)) + 1
    g = float(np.exp(logs[k - 1]))
    return (k, g) if g >= 1.0 + margin else (0, 1.0)


def _speedups(ranges, table):
    """The model's speedup at every batch under `ranges` (1 where k = 0)."""
    ks = np.asarray(per_batch(ranges))
    rows = np.arange(len(ks))
    return np.where(ks > 0, table[rows, np.maximum(ks, 1) - 1], 1.0)


def _gain(advised, runs, table):
    """What running `advised` instead of `runs` would gain: (largest, geometric mean) relative speedup."""
    ratio = _speedups(advised, table) / _speedups(runs, table)
    return float(ratio.max() - 1.0), float(np.exp(np.mean(np.log(ratio))) - 1.0)


def _not_paying(ranges, table, k):
    """Warning text when one k for every batch stops paying inside the range, else None."""
    s = table[:, k - 1]
    off = np.nonzero(~(s >= 1.0))[0]
    if not off.size:
        return None
    return (f"with k = {k} at every batch speculation does not pay from batch {int(off[0]) + 1} on (speedup "
            f"{float(s[off[0]]):.3f}); lower the admission limit to {int(off[0])} or serve those loads without "
            "speculation")


def emit(engine, scenario, ranges, table, margin, version=None, draft_id=None):
    """The engine's configuration for the advised `ranges` (per engine rank, covering 1..admission limit):
    dict(config, command_line, runs, files, engine_version, warnings)."""
    if engine not in ENGINES:
        raise SpecError(f"emit={engine!r}; expected one of {', '.join(ENGINES)}")
    v = parse_version(engine, version)
    admission = ranges[-1][1]
    warnings = []
    model, why = draft_name(scenario, draft_id)
    if why:
        warnings.append(why)
    out = dict(files={}, engine_version=dict(engine=engine, target=_dot(v)), warnings=warnings)
    if max(k for _, _, k in ranges) == 0:  # never a configuration that switches speculation on
        warnings.append("speculation never pays by the margin on the admitted batches: the configuration leaves "
                        "it off")
        cfg, line = _off(engine, scenario, admission)
        out["engine_version"]["minimum"] = _dot(VERSIONS[engine]["oldest"])
        return dict(out, config=cfg, command_line=line, runs=[[1, admission, 0]])
    build = {"vllm": _vllm, "trtllm": _trtllm, "sglang": _sglang}[engine]
    return build(out, v, scenario, ranges, table, margin, model, admission)


def _off(engine, scenario, admission):
    n = admission * (scenario.dp_attention if engine == "sglang" else 1)
    if engine == "vllm":
        return {"max_num_seqs": n}, f"--max-num-seqs {n}"
    if engine == "trtllm":
        return {"max_batch_size": n}, f"max_batch_size: {n}"
    return {"max_running_requests": n}, f"--max-running-requests {n}"


def _upto(ranges, n):
    """The ranges cut at batch n."""
    return [[a, min(b, n), k] for a, b, k in ranges if a <= n]


def _single(out, ranges, table, margin, reason):
    """The one k an engine without a batch switch runs, with what the advice would have gained; where that k
    does not fit up to the admission limit, the runs (and so the emitted admission limit) stop earlier."""
    k, _ = single_k(table, margin)
    if not k:
        out["warnings"].append(f"{reason}: no single k pays by the margin over the admitted batches: the "
                               "configuration leaves speculation off")
        return 0, [[1, ranges[-1][1], 0]]
    fits = np.isfinite(table[:, k - 1])
    n = int(np.argmin(fits)) if not fits.all() else len(fits)
    runs = [[1, n, k]]
    advised = _upto(ranges, n)
    if runs != ranges:
        big, mean = _gain(advised, runs, table[:n])
        out["warnings"].append(f"{reason}: one k = {k} at every batch; the advised ranges would gain up to "
                               f"{big:.1%} (geometric mean {mean:.1%} over batches 1-{n})")
    if n < ranges[-1][1]:
        out["warnings"].append(f"with k = {k} the drafter fits up to batch {n}: the admission limit is lowered to "
                               f"{n} (batches {n + 1}-{ranges[-1][1]} fit only at a smaller k)")
    w = _not_paying(advised, table[:n], k)
    if w:
        out["warnings"].append(w)
    return k, runs


def _vllm(out, v, scenario, ranges, table, margin, model, admission):
    feats = VERSIONS["vllm"]
    dp = scenario.dp_attention
    name = method(scenario, "vllm")
    spec = {"method": name, **({"model": model} if model else {})}
    has_table = v >= feats["table"]
    if has_table and dp == 1 and len(ranges) > 1:
        k_top = max(k for _, _, k in ranges)
        spec.update(num_speculative_tokens=k_top, num_speculative_tokens_per_batch_size=[list(r) for r in ranges])
        runs = [list(r) for r in ranges]
        out["engine_version"]["minimum"] = _dot(feats["table"])
        if name == "mtp":
            out["warnings"].append("vLLM issue 49548: with MTP the per-batch table can collapse throughput where the "
                                   "running batch crosses a range boundary (V1 runner, piecewise CUDA graphs)")
        out["warnings"].append("vLLM's V1 model runner runs piecewise CUDA graphs while the table is on (a cost at "
                               "small batch, not in the model); under VLLM_USE_V2_MODEL_RUNNER=1 the table has no "
                               "effect (issue 51510)")
    elif len(ranges) == 1:  # one k for every batch: no table needed
        spec["num_speculative_tokens"] = ranges[0][2]
        runs = [list(ranges[0])]
        out["engine_version"]["minimum"] = _dot(feats["oldest"])
    else:
        reason = (f"vLLM with --data-parallel-size {dp} drops num_speculative_tokens_per_batch_size "
                  "(_maybe_disable_dynamic_sd_for_data_parallel) and runs num_speculative_tokens at every batch"
                  if has_table else
                  f"vLLM {_dot(v)} has no num_speculative_tokens_per_batch_size (first in "
                  f"{_dot(feats['table'])})")
        k, runs = _single(out, ranges, table, margin, reason)
        if not k:
            cfg, line = _off("vllm", scenario, admission)
            out["engine_version"]["minimum"] = _dot(feats["oldest"])
            return dict(out, config=cfg, command_line=line, runs=runs)
        spec["num_speculative_tokens"] = k
        out["engine_version"]["minimum"] = _dot(feats["oldest"])
    if scenario.draft_tp:
        spec["draft_tensor_parallel_size"] = scenario.draft_tp
    if scenario.drafter == "parallel":
        _, extra, first = parallel(scenario, "vllm")
        spec.update(extra)
        _at_least(out, v, first, f"vLLM's {name}" + (" with parallel_drafting" if extra else ""))
    n = runs[-1][1]
    cfg = {"max_num_seqs": n, "speculative_config": spec}
    line = f"--max-num-seqs {n} --speculative-config '{json.dumps(spec)}'"
    return dict(out, config=cfg, command_line=line, runs=runs)


def _trtllm(out, v, scenario, ranges, table, margin, model, admission):
    feats = VERSIONS["trtllm"]
    name = method(scenario, "trtllm")
    spec = {"decoding_type": name}
    if model:
        spec["speculative_model"] = model
    length_key = "num_nextn_predict_layers" if name == "MTP" and v < feats["last_keys"] else "max_draft_len"
    minimum = feats["oldest"]
    if name == "MTP" or v < feats["schedule"]:
        reason = ("TensorRT-LLM's plain MTP ignores draft_len_schedule" if name == "MTP" else
                  f"TensorRT-LLM {_dot(v)} has no draft_len_schedule (first in {_dot(feats['schedule'])})")
        on = [r for r in ranges if r[2]]
        if name != "MTP" and len(on) == 1 and on[0][0] == 1:  # one k, then off: max_concurrency switches it
            runs = [list(r) for r in ranges]
            spec.update({length_key: on[0][2], "max_concurrency": on[0][1]})
        else:
            k, runs = _single(out, ranges, table, margin, reason)
            if not k:
                cfg, line = _off("trtllm", scenario, admission)
                return dict(out, config=cfg, command_line=line, runs=runs,
                            engine_version={**out["engine_version"], "minimum": _dot(minimum)})
            spec[length_key] = k
    else:
        k1 = ranges[0][2]
        runs = merge([[a, b, min(k, k1)] for a, b, k in ranges])  # no batch drafts more than the smallest key
        if runs != ranges:
            big, mean = _gain(ranges, runs, table)
            if k1:
                out["warnings"].append(f"TensorRT-LLM caps every scheduled draft length at the smallest key's "
                                       f"(max_draft_len = {k1}); the advice would gain up to {big:.1%} (geometric "
                                       f"mean {mean:.1%})")
            else:
                first_on = next(r[0] for r in ranges if r[2])
                out["warnings"].append(f"speculation pays from batch {first_on} on but not at batch 1, and "
                                       "TensorRT-LLM's schedule must start at max_draft_len > 0: the configuration "
                                       f"leaves it off (the advice would gain up to {big:.1%})")
                cfg, line = _off("trtllm", scenario, admission)
                return dict(out, config=cfg, command_line=line, runs=runs,
                            engine_version={**out["engine_version"], "minimum": _dot(minimum)})
        spec["max_draft_len"] = k1
        if len(runs) > 1:
            if v >= feats["last_keys"]:  # key = last batch of its range; above the largest key: 0
                keys = runs[:-1] if runs[-1][2] == 0 else runs
                spec["draft_len_schedule"] = {str(last): k for _, last, k in keys}
                minimum = feats["last_keys"]
            else:  # key = first batch of its range; the last value holds above the largest key
                spec["draft_len_schedule"] = {str(first): k for first, _, k in runs}
                minimum = feats["schedule"]
                out["warnings"].append(f"draft_len_schedule keys are first batches here, as TensorRT-LLM "
                                       f"{_dot(feats['schedule'])} reads them; 1.3 and later read a key as the last "
                                       "batch of its range: re-emit with --engine-version for those")
        if scenario.dp_attention > 1 and "draft_len_schedule" in spec:
            out["warnings"].append("under attention DP TensorRT-LLM resolves the draft length from each rank's own "
                                   "batch (no cross-rank sync): ranks whose batches sit in different ranges draft "
                                   "different k in one step")
        if name == "DraftTarget" and any(k == 0 for _, _, k in runs):
            off = [f"{a}-{b}" for a, b, k in runs if k == 0]
            out["warnings"].append(f"recent TensorRT-LLM code (PR 16888) floors the draft-target one-model path's "
                                   f"scheduled 0 at 1: batches {', '.join(off)} would draft 1 instead of switching "
                                   "off on such a build")
    if scenario.drafter == "parallel" and "draft_len_schedule" in spec:
        out["warnings"].append(f"TensorRT-LLM's {name} path may not read draft_len_schedule (not checked in its "
                               "sources): if it does not, it drafts max_draft_len at every batch")
    n = runs[-1][1]
    cfg = {"max_batch_size": n, "speculative_config": spec}
    line = f"max_batch_size: {n}\nspeculative_config: {json.dumps(spec)}"
    return dict(out, config=cfg, command_line=line, runs=runs,
                engine_version={**out["engine_version"], "minimum": _dot(minimum)})


CUDA_GRAPH_LADDER = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 513, 16)) \
    + list(range(544, 4097, 32))


def cuda_graph_bs(ranges):
    """Batch sizes to capture: a ladder like SGLang's default up to the admission limit, plus every range's last
    batch, so that padding a batch up to a captured size never leaves its range."""
    top = ranges[-1][1]
    return sorted({b for b in CUDA_GRAPH_LADDER if b <= top} | {last for _, last, _ in ranges})


def _sglang(out, v, scenario, ranges, table, margin, model, admission):
    feats = VERSIONS["sglang"]
    dp = scenario.dp_attention
    name = method(scenario, "sglang")
    cfg = {"max_running_requests": admission * dp, "speculative_algorithm": name}
    if model:
        cfg["speculative_draft_model_path"] = model
    why_not = None
    if v < feats["adaptive"]:
        why_not = f"SGLang {_dot(v)} has no --speculative-adaptive (assumed first in {_dot(feats['adaptive'])})"
    elif name not in ("EAGLE", "EAGLE3"):
        why_not = f"SGLang's --speculative-adaptive supports EAGLE/EAGLE3/MTP only, not {name}"
    elif dp > 1:
        why_not = "SGLang's --speculative-adaptive is refused under attention DP (tier decisions are not synchronized"\
                  " across DP ranks)"
    if why_not is None and len(ranges) > 1:
        k_top = max(k for _, _, k in ranges)
        slots = {str(first): {"candidate_steps": [k]} for first, _, k in ranges}
        out["files"][ADAPTIVE_FILE] = slots
        cfg.update(speculative_num_steps=k_top, speculative_eagle_topk=1, speculative_num_draft_tokens=k_top + 1,
                   speculative_adaptive=True, speculative_adaptive_config=ADAPTIVE_FILE,
                   cuda_graph_bs=cuda_graph_bs(ranges))
        runs = [list(r) for r in ranges]
        out["engine_version"]["minimum"] = _dot(feats["adaptive"])
    else:
        if why_not is None:
            k, runs = ranges[0][2], [list(r) for r in ranges]
        else:
            k, runs = _single(out, ranges, table, margin, why_not + "; SGLang runs")
        if not k:
            c, line = _off("sglang", scenario, admission)
            return dict(out, config=c, command_line=line, runs=runs,
                        engine_version={**out["engine_version"], "minimum": _dot(feats["oldest"])})
        if name == "DFLASH":  # one block of k + 1 tokens (the last verified one and k drafts), in one pass
            cfg.update(speculative_dflash_block_size=k + 1, speculative_num_draft_tokens=k + 1)
            out["warnings"].append("SGLang's DFLASH (PR 22077, 2026-04; first release not checked) runs without DP "
                                   "attention and with pp_size 1; its overlap scheduler (spec v2) came in PR 23000")
        else:
            cfg.update(speculative_num_steps=k, speculative_eagle_topk=1, speculative_num_draft_tokens=k + 1)
        out["engine_version"]["minimum"] = _dot(feats["oldest"])
    cfg["max_running_requests"] = runs[-1][1] * dp
    if dp > 1:
        out["warnings"].append(f"--max-running-requests counts all {dp} attention-DP ranks: {runs[-1][1]} per rank")
    flags = []
    for key, val in cfg.items():
        flag = "--" + key.replace("_", "-")
        flags.append(flag if val is True else f"{flag} {' '.join(map(str, val))}" if isinstance(val, list)
                     else f"{flag} {val}")
    return dict(out, config=cfg, command_line=" ".join(flags), runs=runs)


__all__ = ["ENGINES", "VERSIONS", "ADMISSION", "CONTEXT_TABLE", "METHODS", "PARALLEL", "parse_version",
           "parallel_kind", "parallel", "method", "draft_name", "merge",
           "per_batch", "single_k", "cuda_graph_bs", "emit"]
