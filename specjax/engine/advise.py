"""From the model's best draft length per batch to an engine's own speculative configuration.

`schedule` evaluates every integer batch 1..max_num_seqs at every k in 1..k_max (the step kernel,
vmapped: exact, no search), keeps the best k where its speedup is at least 1 + margin (else k = 0:
speculation off; the margin keeps a threshold clear of the batch where the speedup crosses 1, where
users see the engine flap between on and off), and merges equal neighbours into ranges
[first, last, k]. `emit` writes the ranges in an engine's terms:

- vllm: `--speculative-config` JSON with `method`, `model`, `num_speculative_tokens` (the largest k)
  and `num_speculative_tokens_per_batch_size` ([[1, 64, 3], [65, 96, 2], [97, max_num_seqs, 0]]);
- trtllm: `speculative_config` with `decoding_type`, `max_draft_len` and `draft_len_schedule` ({first
  batch of each range: k}; TensorRT-LLM requires {1: max_draft_len}, so no range drafts more than batch 1
  does: larger k are clamped, with the speedup that costs in a warning), or `max_concurrency` where the
  schedule is one k then off;
- sglang: one k for every batch (SGLang has no batch switch): `--speculative-num-steps k
  --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1`, the k with the best geometric-mean
  speedup over the served batches, and a warning when speculation does not pay inside the range.

A parallel drafter (MODEL.md 2.3) is named by the kind of its config (`PARALLEL`): vLLM's draft_model or
eagle3 with `parallel_drafting`, or dflash; TensorRT-LLM's PARD or DFlash; SGLang's DFLASH.
"""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np

from ..cost.speculative import step
from ..cost.status import Point
from ..errors import SpecError

EMIT = ("vllm", "sglang", "trtllm")
MARGIN = 0.03


@functools.partial(jax.jit, static_argnames=("k_max",))
def _grid(hw, deploy, tgt, draft, dec, batches, k_max):
    ks = jnp.arange(1, k_max + 1, dtype=dec.alpha.dtype)

    def at(b, k):
        r = step(hw, deploy, tgt, draft, dec.replace(batch=b, k=k))
        return jnp.where(r.status == int(Point.OK), r.speedup, jnp.nan)

    return jax.vmap(lambda b: jax.vmap(lambda k: at(b, k))(ks))(batches)


def schedule(scenario, max_num_seqs, k_max=8, margin=MARGIN, dtype=None):
    """(ranges [[first, last, k], ...], speedup table (batches x k), best speedup per batch)."""
    if scenario.tree_topk is not None:
        raise SpecError("advise schedules chain draft lengths; drop --tree-topk/--tree-tokens")
    from ..api import block_k

    hw, deploy, tgt, draft, dec = scenario.build(*(dtype,) if dtype else ())
    k_max = min(k_max, block_k(scenario) or k_max)  # a DFlash drafter: at most its block
    batches = np.arange(1, int(max_num_seqs) + 1, dtype=np.asarray(dec.alpha).dtype)
    table = np.asarray(_grid(hw, deploy, tgt, draft, dec, batches, int(k_max)), np.float64)
    filled = np.where(np.isnan(table), -np.inf, table)
    best_k = np.argmax(filled, axis=1) + 1
    best = filled[np.arange(len(batches)), best_k - 1]
    k_of = np.where(best >= 1.0 + margin, best_k, 0)
    ranges = _merge([[int(b), int(b), int(k)] for b, k in zip(batches.astype(int), k_of)])
    return ranges, table, np.where(np.isfinite(best), best, np.nan)


def _merge(ranges):
    """Neighbouring ranges with the same k as one."""
    out = []
    for first, last, k in ranges:
        if out and out[-1][2] == k:
            out[-1][1] = last
        else:
            out.append([first, last, k])
    return out


def expected(ranges, table):
    """Per range: its k, the model's speedup at both ends and its minimum (1 where k = 0), and why a range
    is off (`does_not_pay`, or `does_not_fit`: the batch does not fit in memory with the drafter at any k)."""
    out = []
    for first, last, k in ranges:
        s = table[first - 1:last, k - 1] if k else np.ones(last - first + 1)
        why = None if k else ("does_not_fit" if np.isnan(table[first - 1]).all() else "does_not_pay")
        out.append(dict(batches=[first, last], k=k, speedup_min=float(np.nanmin(s)), speedup_first=float(s[0]),
                        speedup_last=float(s[-1]), off_because=why))
    return out


METHODS = {  # engine -> drafter kind -> its name there; an EAGLE head: (EAGLE-1/2 name, EAGLE-3 name)
    "vllm": {"eagle": ("eagle", "eagle3"), "model": "draft_model", "ngram": "ngram", "mtp": "mtp"},
    "trtllm": {"eagle": ("Eagle", "Eagle3"), "model": "DraftTarget", "ngram": "NGram", "mtp": "MTP"},
    "sglang": {"eagle": ("EAGLE", "EAGLE3"), "model": "STANDALONE", "ngram": "NGRAM", "mtp": "EAGLE"},
}


# A parallel drafter (MODEL.md 2.3), by the kind of its config: (name, extra keys) per engine; None: not served.
# vLLM: draft_model / eagle3 with "parallel_drafting": true (PARD, P-EAGLE; vLLM PR 32887), "dflash" (DFlash);
# TensorRT-LLM: PARDDecodingConfig, DFlashDecodingConfig; SGLang: --speculative-algorithm DFLASH only.
PARALLEL = {
    "vllm": {"model": ("draft_model", {"parallel_drafting": True}), "eagle": ("eagle3", {"parallel_drafting": True}),
             "dflash": ("dflash", {})},
    "trtllm": {"model": ("PARD", {}), "eagle": None, "dflash": ("DFlash", {})},
    "sglang": {"model": None, "eagle": None, "dflash": ("DFLASH", {})},
}


def parallel_kind(scenario):
    """"dflash", "eagle" (P-EAGLE) or "model" (PARD): the config behind a parallel drafter."""
    from ..inputs import models

    arch = models.load_architecture(scenario.draft)
    return "dflash" if arch.dflash_features else ("eagle" if arch.eagle_version else "model")


def _parallel_method(scenario, engine):
    kind = parallel_kind(scenario)
    found = PARALLEL[engine][kind]
    if found is None:
        served = [e for e, table in PARALLEL.items() if table[kind]]
        raise SpecError(f"emit={engine!r} has no parallel {'EAGLE head' if kind == 'eagle' else 'draft model'} "
                        f"(draft={scenario.draft!r}); expected one of {', '.join(served)}")
    return found


def _method(scenario, engine):
    """The engine's name for the scenario's drafter (EAGLE-3 heads told apart by their config)."""
    from ..inputs import models

    if scenario.drafter == "parallel":
        return _parallel_method(scenario, engine)[0]
    names = METHODS[engine]
    if scenario.drafter not in names:
        raise SpecError(f"drafter={scenario.drafter!r} has no engine configuration (an abstract cost-ratio or "
                        f"self-speculation drafter); expected one of {', '.join(names)}")
    name = names[scenario.drafter]
    if isinstance(name, tuple):
        name = name[models.load_architecture(scenario.draft).eagle_version == 3]
    return name


def emit(engine, scenario, ranges, table, best, max_num_seqs):
    """The engine's configuration (a dict), the command-line form, and warnings."""
    from ..inputs import models

    k_top = max(k for _, _, k in ranges)
    warnings = []
    if scenario.draft in models.preset_slugs():
        warnings.append(f"{scenario.draft!r} is specjax's preset name: put the draft's Hugging Face id or path in its "
                        "place")
    if k_top == 0:
        warnings.append("speculation never pays by the margin on the served range: leave it off")
    if engine == "vllm":
        cfg = {"method": _method(scenario, "vllm"), "num_speculative_tokens": max(k_top, 1),
               "num_speculative_tokens_per_batch_size": [list(r) for r in ranges]}
        if scenario.draft:
            cfg = {"method": cfg["method"], "model": scenario.draft, **{k: v for k, v in cfg.items() if k != "method"}}
        if scenario.draft_tp:
            cfg["draft_tensor_parallel_size"] = scenario.draft_tp
        if scenario.drafter == "parallel":
            cfg.update(_parallel_method(scenario, "vllm")[1])
        return cfg, f"--speculative-config '{json.dumps(cfg)}'", warnings
    if engine == "trtllm":
        cfg = {"decoding_type": _method(scenario, "trtllm"), "max_draft_len": max(k_top, 1)}
        if scenario.draft and scenario.drafter != "mtp":
            cfg["speculative_model"] = scenario.draft
        k1 = ranges[0][2]
        if k1 and k_top > k1:  # TensorRT-LLM: draft_len_schedule[1] = max_draft_len, so no range drafts more
            clamped = _merge([[a, b, min(k, k1)] for a, b, k in ranges])
            loss = max(1.0 - table[i - 1, min(k, k1) - 1] / table[i - 1, k - 1]
                       for a, b, k in ranges if k > k1 for i in range(a, b + 1))
            warnings.append(f"TensorRT-LLM caps every draft length at the one of batch 1 ({k1}); the ranges that "
                            f"would draft {k_top} lose up to {loss:.1%} of their speedup")
            ranges = clamped
            cfg["max_draft_len"] = k1
        on = [r for r in ranges if r[2]]
        if len(on) == 1 and on[0][0] == 1 and on[0][1] < max_num_seqs:  # one k, then off: TRT's switch
            cfg["max_concurrency"] = on[0][1]
        elif on:
            cfg["draft_len_schedule"] = {str(first): k for first, _, k in ranges}
        return cfg, "speculative_config: " + json.dumps(cfg), warnings
    if engine == "sglang":
        with np.errstate(invalid="ignore", divide="ignore"):
            logs = np.nanmean(np.log(table), axis=0)  # geometric mean over the served batches, per k
        k = int(np.nanargmax(logs)) + 1 if np.isfinite(logs).any() else 1
        s = table[:, k - 1]
        off = np.nonzero(~(s >= 1.0))[0]
        if off.size:
            warnings.append(f"with k = {k} speculation does not pay from batch {int(off[0]) + 1} on (inside the served "
                            f"range up to {max_num_seqs}); SGLang has no batch switch: cap --max-running-requests at "
                            f"{int(off[0])} or serve those loads without speculation")
        cfg = {"speculative_algorithm": _method(scenario, "sglang"), "speculative_num_steps": k,
               "speculative_eagle_topk": 1, "speculative_num_draft_tokens": k + 1}
        if scenario.drafter == "parallel":  # DFLASH drafts the block its config names, in one pass
            from ..inputs import models
            block = models.load_architecture(scenario.draft).block_size
            cfg = {"speculative_algorithm": cfg["speculative_algorithm"]}
            if k != block - 1:
                warnings.append(f"SGLang's DFLASH drafts the block of the drafter's config ({block - 1} tokens); the "
                                f"model's best k on the served range is {k}")
        if scenario.draft and scenario.drafter != "mtp":
            cfg["speculative_draft_model_path"] = scenario.draft
        flags = " ".join(f"--{key.replace('_', '-')} {v}" for key, v in cfg.items())
        return cfg, flags, warnings
    raise SpecError(f"emit={engine!r}; expected one of {', '.join(EMIT)}")


def speedup_at(table, batch, k):
    """The model's speedup at an integer batch and k (1.0 at k = 0), from the schedule's table."""
    return 1.0 if k == 0 else float(table[int(batch) - 1, k - 1])


__all__ = ["EMIT", "MARGIN", "schedule", "expected", "emit", "speedup_at"]
