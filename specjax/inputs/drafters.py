"""The drafter registry: every drafter kind is one `DrafterKind` record (docs/model.md §5.1).

A record says whether the kind needs a draft config (`--draft`), whether its cost is a ratio of the
target's pass, whether it can appear in measurement CSVs, and how its `Model` pytree is built from
the target's and the draft's `Architecture`. Adding a drafter kind is one `register(...)` call;
`Scenario`, sweep specs, measurement files and the CLI read the registry.
"""

import dataclasses
from typing import Callable

from .. import _lazy
from ..errors import SpecError, field_error

_models = _lazy.module("specjax.inputs.models")


@dataclasses.dataclass(frozen=True)
class DrafterKind:
    """One way of proposing draft tokens.

    Attributes:
      name: the value of `--drafter`, the spec key `drafter` and the CSV column `drafter`.
      help: one line for `--help` and the README.
      build: (target_arch, draft_arch | None, dts) -> draft `Model`; dts holds weight_dtype,
        expert_dtype, kv_dtype and dtype.
      needs_draft: a draft model or head config must be given (`--draft`).
      cost_ratio: the draft pass costs `draft_cost` x T_target(B, 1) (Leviathan's c).
      measurable: may appear in measurement CSVs.
      check: optional (target_arch) -> None, raising `SpecError` for a target it cannot draft for.
      check_pair: optional (target_arch, draft_arch) -> None, raising `SpecError` for a draft config
        that cannot serve this target.
      runs_model: its draft passes run a model on GPUs (so it has a layout: `--draft-tp`).
      needs_kv_budget: the kind is defined by a bounded draft KV cache (`--draft-kv-budget`).
      parallel: the kind proposes all k tokens in `--draft-passes` passes over B x k tokens instead of k
        sequential passes over B tokens (docs/model.md §5.2; `Decode.draft_passes`).
    """

    name: str
    help: str
    build: Callable
    needs_draft: bool = False
    cost_ratio: bool = False
    measurable: bool = True
    check: Callable | None = None
    check_pair: Callable | None = None
    runs_model: bool = True
    needs_kv_budget: bool = False
    parallel: bool = False


REGISTRY = {}


def register(kind):
    """Add a drafter kind (replacing one of the same name); returns it."""
    REGISTRY[kind.name] = kind
    return kind


def get(name, source=None, field="drafter"):
    """The record of drafter `name`, or a `SpecError` listing the known kinds."""
    if name not in REGISTRY:
        raise field_error(field, name, f"one of {', '.join(REGISTRY)}", source)
    return REGISTRY[name]


def names(measurable_only=False):
    return tuple(n for n, k in REGISTRY.items() if k.measurable or not measurable_only)


def _no_model(target, draft, dts):
    return _models.Model.zeros(dts["dtype"])


def _has_mtp(target):
    if not target.mtp_layers:
        raise field_error("drafter", "mtp", f"a target with MTP layers ({target.name} has none)", target.source)


def _no_expert_dtype(dts):
    """A separate draft model and an EAGLE head take the weight dtype for all their weights."""
    return {k: v for k, v in dts.items() if k != "expert_dtype"}


def _same_vocab(target, draft, what="a draft model"):
    """Drafts are proposed and verified as token ids of one vocabulary: the draft's vocab_size must be the
    target's (an EAGLE-3 head's smaller draft_vocab_size maps into it). Checked for EAGLE heads and separate
    draft models alike: vLLM asserts equal vocabulary sizes (its draft-model worker), SGLang's STANDALONE
    mode refuses differing vocabularies (sgl-project/sglang#23838), llama.cpp too; token translation between
    vocabularies (TLI, Universal Assisted Generation) is not in those engines and not modelled. A pair that
    only pads one tokenizer to another size (Qwen2.5 0.5B's 151,936 beside 32B's 152,064) is refused as the
    engines refuse it: give the draft a config with the target's vocab_size, as a deployment must."""
    if draft.vocab != target.vocab:
        raise field_error("draft", draft.name, f"{what} with vocab_size {target.vocab} like the target {target.name} "
                          f"(this one has {draft.vocab}: another tokenizer, whose token ids the target cannot "
                          "verify; vLLM and SGLang refuse such a pair)", draft.source)


def _not_larger(target, draft):
    """A separate draft model whose active parameters (read by every draft pass, at any batch) do not exceed all of
    the target's (the most a verify pass reads): otherwise every draft pass costs more than the verify pass it is
    meant to save, which no engine deploys; it was accepted silently (with --ignore-memory: a speedup of 0.15).
    An MoE draft with more parameters in all but fewer active ones (Qwen3-30B-A3B for Qwen3-8B) stays, and so does
    the target as its own draft (an honest lower bound)."""
    t_all, d_active = float(_models.target(target).total_params), float(_models.target(draft).active_params)
    if d_active > t_all:
        raise field_error("draft", draft.name, f"a draft model that reads no more per pass than the target "
                          f"{target.name} holds ({t_all / 1e9:.1f}B parameters; this one reads {d_active / 1e9:.1f}B "
                          "active, so every draft pass would cost more than the verify pass it saves)", draft.source)


def _same_hidden_size(target, head):
    """An EAGLE head runs on the target's hidden states: its hidden size must be the target's, and so must
    its vocabulary."""
    if head.d_model != target.d_model:
        what = "a DFlash drafter" if head.dflash_features else "an EAGLE head"
        raise field_error("draft", head.name, f"{what} with hidden_size {target.d_model} like the target "
                          f"{target.name} (this head has {head.d_model}; is it the head of another model?)",
                          head.source)
    _same_vocab(target, head, "an EAGLE head")


def _eagle(target, head, dts):
    return _models.eagle_head(head, target, **_no_expert_dtype(dts))


def _not_dflash(target, draft):
    """A DFlash drafter fills its whole block in one pass: it is a parallel drafter, not a chain."""
    if draft.dflash_features:
        raise SpecError(f"draft={draft.name!r} is a DFlash drafter (DFlashDraftModel), which fills its block of "
                        f"{draft.block_size} tokens in one pass; expected drafter=parallel (--drafter parallel)")


def _chain_head(target, head):
    _not_dflash(target, head)
    _same_hidden_size(target, head)


def _parallel(target, draft, dts):
    """A parallel drafter's model from its config: a DFlash drafter (`dflash_head`), a parallel EAGLE head
    (P-EAGLE: an EAGLE-3 config, `eagle_head`) or a separate draft model fed mask tokens (PARD)."""
    if draft.dflash_features:
        return _models.dflash_head(draft, target, **_no_expert_dtype(dts))
    if draft.eagle_version:
        return _models.eagle_head(draft, target, **_no_expert_dtype(dts))
    return _models.target(draft, **_no_expert_dtype(dts))


def _parallel_pair(target, draft):
    """A DFlash drafter or a parallel EAGLE head runs on the target's hidden states (its hidden size)."""
    if draft.dflash_features or draft.eagle_version:
        _same_hidden_size(target, draft)


register(DrafterKind("model", "a separate draft model (--draft: its config.json or slug)",
                     lambda target, draft, dts: _models.target(draft, **_no_expert_dtype(dts)), needs_draft=True,
                     check_pair=lambda target, draft: (_not_dflash(target, draft), _same_vocab(target, draft),
                                                       _not_larger(target, draft))))
register(DrafterKind("eagle", "an EAGLE-1 / EAGLE-3 head on the target's hidden states (--draft: the head)",
                     _eagle, needs_draft=True, check_pair=_chain_head))
register(DrafterKind("parallel", "all k tokens in --draft-passes passes over B x k tokens: PARD (a draft model), "
                     "P-EAGLE (an EAGLE-3 head), DFlash (DFlashDraftModel) (--draft: its config.json or slug)",
                     _parallel, needs_draft=True, check_pair=_parallel_pair, parallel=True))
register(DrafterKind("mtp", "the target's own MTP layer, reused autoregressively",
                     lambda target, draft, dts: _models.mtp_head(target, **dts), check=_has_mtp))
register(DrafterKind("self", "the target itself with a bounded KV cache (MagicDec self-speculation; "
                     "--draft-kv-budget)", lambda target, draft, dts: _models.self_draft(target, **dts),
                     needs_kv_budget=True))
register(DrafterKind("ngram", "prompt lookup: no model cost", _no_model, runs_model=False))
register(DrafterKind("ratio", "a draft pass costing --draft-cost x the target's pass (Leviathan's c)", _no_model,
                     cost_ratio=True, measurable=False, runs_model=False))
