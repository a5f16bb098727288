"""A validated operating point in plain Python values, and its conversion to kernel pytrees.

`Scenario` is what the CLI and sweep specs produce: labels (preset slugs or file paths) and
numbers, checked at construction with messages naming the field, the value and the allowed
range. `Scenario.build()` loads the presets and returns `(Hardware, Model, Model, Decode)`.
"""

import dataclasses
import functools
import pathlib

import jax
import jax.numpy as jnp

from ..cost import catalogue
from . import drafters, engines
from . import hardware as _hw
from . import models as _models
from ..cost.acceptance import (TREE_MAX_DEPTH, alpha_from_tokens, alpha_from_tree_tokens, conditional_rates,
                               max_tree_tokens)
from .dtypes import COMPUTE_DTYPES
from ..errors import SpecError, field_error
from ..cost.memory import weights_per_gpu
from ..cost.trees import MODES, Decode, Deployment, Load

K_MAX = int(catalogue.INPUTS["k"].hi)


def check_layout(arch, name, tp, ep=1, dp_attention=1, source=None, role="target"):
    """A layout shards heads by tp, dense FFN widths by the replica's tp x dp_attention GPUs, experts by
    ep and each expert's width by the GPUs per expert group (MODEL.md 1.1): each must divide (KV heads
    may be replicated when there are fewer than tp). One-line errors name the flag and the model."""
    gpus = tp * dp_attention
    if arch.n_heads % tp:
        raise field_error("tp", tp, f"a divisor of the {arch.n_heads} attention heads of {name}", source)
    kv = arch.n_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise field_error("tp", tp, f"a divisor or multiple of the {kv} KV heads of {name}", source)
    if ep > 1:
        if not arch.n_moe_layers and role == "target":
            raise field_error("ep", ep, f"1: {name} has no routed experts to place (expert parallelism needs an "
                              "MoE target)", source)
        if gpus % ep:
            raise field_error("ep", ep, f"a divisor of the replica's tp x dp_attention = {gpus} GPUs", source)
        if arch.n_moe_layers and arch.n_experts % ep:
            raise field_error("ep", ep, f"a divisor of the {arch.n_experts} routed experts of {name}", source)
    expert_tp = gpus // ep if ep <= gpus else 1
    if arch.n_moe_layers and arch.expert_width % expert_tp:
        if expert_tp == tp:
            raise field_error("tp", tp, f"a divisor of the expert width {arch.expert_width} of {name}", source)
        raise field_error("ep", ep, f"a layout whose tp x dp_attention / ep = {expert_tp} GPUs per expert divides "
                          f"the expert width {arch.expert_width} of {name}", source)
    if arch.n_dense_ffn_layers and arch.dense_ffn_width % gpus:
        if dp_attention == 1:
            raise field_error("tp", tp, f"a divisor of the FFN width {arch.dense_ffn_width} of {name}", source)
        raise field_error("dp_attention", dp_attention, f"a layout whose tp x dp_attention = {gpus} GPUs divides "
                          f"the FFN width {arch.dense_ffn_width} of {name}", source)


def check_draft_tp(draft_tp, gpus, source=None):
    """The drafter runs on draft_tp of the replica's GPUs: a divisor of them."""
    if draft_tp is not None and (draft_tp > gpus or gpus % draft_tp):
        raise field_error("draft_tp", draft_tp, f"a divisor of the replica's tp x dp_attention = {gpus} GPUs",
                          source)


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One operating point. Exactly one of `alpha` and `accepted_length` is given. `engine` names an
    engine profile (`engines.load`: a preset slug, `roofline`, or a TOML path); None keeps the hardware
    file's own terms (pure roofline for the presets)."""

    target: str
    hardware: str
    drafter: str = "ratio"
    draft: str | None = None
    draft_cost: float | None = None
    tp: int = 1
    ep: int = 1
    dp_attention: int = 1
    draft_tp: int | None = None
    expert_imbalance: float = 1.0
    batch: float = 1.0
    k: float = 2
    alpha: float | None = None
    accepted_length: float | None = None
    context: float = 2048.0
    weight_dtype: str | None = None
    expert_dtype: str | None = None
    kv_dtype: str | None = None
    compute_dtype: str = "bf16"
    roofline: str = "operator"
    memory_fraction: float = 0.9
    engine: str | None = None
    expert_locality: float = 0.0
    acceptance_vector: tuple | None = None
    position_rates: tuple | None = None
    tree_topk: int | None = None
    tree_tokens: int | None = None
    draft_kv_budget: float | None = None
    qps: float | None = None
    input_len: float | None = None
    output_len: float | None = None
    max_num_seqs: int | None = None
    chunk_tokens: int | None = None
    concurrency: float | None = None
    source: str | None = None

    def __post_init__(self):
        src = self.source
        kind = drafters.get(self.drafter, src)
        if self.roofline not in MODES:
            raise field_error("roofline", self.roofline, f"one of {', '.join(MODES)}", src)
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise field_error("compute_dtype", self.compute_dtype, f"one of {', '.join(COMPUTE_DTYPES)}", src)
        for name in ("batch", "k", "context", "tp", "ep", "dp_attention", "expert_imbalance", "memory_fraction",
                     "expert_locality"):
            catalogue.check(name, getattr(self, name), src)
        if self.draft_tp is not None:
            catalogue.check("draft_tp", self.draft_tp, src)
            if not kind.runs_model:
                raise SpecError(f"draft_tp={self.draft_tp} is for a drafter that runs a model; drafter="
                                f"{self.drafter!r} runs none" + (f" in {src}" if src else ""))
        given = [n for n in ("alpha", "accepted_length", "acceptance_vector", "position_rates")
                 if getattr(self, n) is not None]
        if len(given) != 1:
            raise SpecError("give exactly one of alpha, accepted_length, acceptance_vector and position_rates"
                            + (f" (got {', '.join(given)})" if given else "") + (f" in {src}" if src else ""))
        self._check_tree(kind, src)
        self._check_load(src)
        if self.alpha is not None:
            catalogue.check("alpha", self.alpha, src)
        elif self.accepted_length is not None and (not catalogue.INPUTS["accepted_length"].ok(self.accepted_length)
                                                   or self.accepted_length > self.k + 1):
            raise field_error("accepted_length", self.accepted_length, f"1 <= tau <= k+1 = {self.k + 1:g}", src)
        for name in ("acceptance_vector", "position_rates"):
            vec = getattr(self, name)
            if vec is None:
                continue
            if not isinstance(vec, (tuple, list)) or not 1 <= len(vec) <= K_MAX:
                raise field_error(name, vec, f"1 to {K_MAX} rates in [0, 1]", src)
            for i, v in enumerate(vec):
                catalogue.check("alpha", v, src, f"{name}[{i}]")
            if name == "position_rates" and any(b > a for a, b in zip(vec, vec[1:])):
                raise field_error(name, list(vec), "non-increasing rates (vLLM's per-position acceptance is the "
                                  "share of drafts accepted up to each position; for conditional rates use "
                                  "acceptance_vector)", src)
        if self.draft_kv_budget is not None:
            catalogue.check("draft_kv_budget", self.draft_kv_budget, src)
            if not kind.runs_model:
                raise SpecError(f"draft_kv_budget is for a drafter that runs a model; drafter={self.drafter!r} "
                                "runs none" + (f" in {src}" if src else ""))
        if kind.needs_kv_budget and self.draft_kv_budget is None:
            raise SpecError(f"drafter={self.drafter!r} needs draft_kv_budget (--draft-kv-budget: the tokens of KV "
                            "the drafter keeps, e.g. 512; MagicDec uses 256-2048)" + (f" in {src}" if src else ""))
        if kind.needs_draft and not self.draft:
            raise SpecError(f"drafter={self.drafter!r} needs a draft model or head (--draft)"
                            + (f" in {src}" if src else ""))
        if self.draft and not kind.needs_draft:
            needing = " or ".join(n for n, k in drafters.REGISTRY.items() if k.needs_draft)
            raise SpecError(f"draft={self.draft!r} is used only with drafter = {needing} (--drafter); "
                            f"drafter={self.drafter!r} takes no draft" + (f" in {src}" if src else ""))
        if kind.cost_ratio:
            catalogue.check("draft_cost", self.draft_cost, src)

    @property
    def has_load(self):
        """True when the scenario carries a serving load (MODEL.md 6): input and output lengths given."""
        return self.input_len is not None

    def _check_load(self, src):
        given = [n for n in catalogue.LOAD if getattr(self, n) is not None]
        for name in given:
            catalogue.check(name, getattr(self, name), src)
        if given and (self.input_len is None or self.output_len is None):
            raise SpecError(f"a serving load needs input_len and output_len (--input-len, --output-len; got "
                            f"{', '.join(given)})" + (f" in {src}" if src else ""))

    def load(self, dtype=jnp.float32):
        """The `Load` pytree (None without a serving load); an unset rate is a placeholder 1 request/s,
        max_num_seqs and chunk_tokens default to `Load`'s (256 and 2048)."""
        if not self.has_load:
            return None
        values = {f.name: f.default for f in dataclasses.fields(Load) if f.default is not dataclasses.MISSING}
        values.update({"qps": 1.0}, **{n: getattr(self, n) for n in catalogue.LOAD if getattr(self, n) is not None})
        return Load(**{n: jnp.asarray(v, dtype) for n, v in values.items()})

    def _check_tree(self, kind, src):
        if (self.tree_topk is None) != (self.tree_tokens is None):
            raise SpecError("give both tree_topk and tree_tokens for a draft tree (--tree-topk, --tree-tokens)"
                            + (f" in {src}" if src else ""))
        if self.tree_topk is None:
            return
        catalogue.check("tree_topk", self.tree_topk, src)
        catalogue.check("tree_tokens", self.tree_tokens, src)
        if not kind.runs_model:
            raise SpecError(f"a draft tree needs a drafter that runs a model; drafter={self.drafter!r} runs none"
                            + (f" in {src}" if src else ""))
        if not float(self.k).is_integer() or self.k < 1:
            raise field_error("k", self.k, "an integer >= 1: the tree depth (draft steps)", src)
        if self.tree_topk > 1 and self.k > TREE_MAX_DEPTH:
            raise field_error("k", self.k, f"a tree depth <= {TREE_MAX_DEPTH} (the deepest tree the tau estimate "
                              "covers)", src)
        most = float(max_tree_tokens(self.tree_topk, self.k))
        least = self.k + 1
        if self.tree_topk == 1 and self.tree_tokens != least:
            raise field_error("tree_tokens", self.tree_tokens, f"k + 1 = {least:g} for tree_topk = 1 (a chain)", src)
        if not least <= self.tree_tokens <= most:
            raise field_error("tree_tokens", self.tree_tokens, f"{least:g} <= tree_tokens <= {most:g} for depth k = "
                              f"{self.k:g} and topk {self.tree_topk} (root included)", src)

    def replace_acceptance(self, **kw):
        """A copy with the acceptance given another way (one of alpha, accepted_length, a vector)."""
        none = dict.fromkeys(("alpha", "accepted_length", "acceptance_vector", "position_rates"))
        return dataclasses.replace(self, **{**none, **kw})

    def rates(self):
        """The conditional per-position acceptance (a_1..a_V) as floats, or None for i.i.d. alpha."""
        if self.acceptance_vector is not None:
            return [float(v) for v in self.acceptance_vector]
        if self.position_rates is not None:
            return conditional_rates(self.position_rates)
        return None

    def memory_error(self):
        """A message if the weights of target and drafter alone exceed tp x HBM x memory_fraction, else None."""
        hw, deploy, tgt, draft, _ = self.build()
        weights = float(weights_per_gpu(deploy, (tgt, draft), (deploy, deploy.drafter())))
        budget = float(hw.hbm_bytes) * self.memory_fraction
        if weights <= budget:
            return None
        layout = f"tp={self.tp}" + (f" x dp_attention={self.dp_attention}" if self.dp_attention > 1 else "") \
            + (f", ep={self.ep}" if self.ep > 1 else "") + (f", draft_tp={self.draft_tp}" if self.draft_tp else "")
        return (f"the weights of {self.target}" + (f" + {self.draft}" if self.draft else "")
                + f" on the busiest GPU ({weights / 1e9:.1f} GB with {layout}) do not fit in "
                f"{float(hw.hbm_bytes) / 1e9:.0f} GB x memory_fraction={self.memory_fraction:g} = {budget / 1e9:.1f} "
                "GB; expected weights <= budget (raise --tp, lower --weight-dtype, or pass --ignore-memory)")

    def resolved_alpha(self):
        """alpha: given, solved from the accepted length (through the tree estimate for a tree), or the
        first conditional rate of a per-position vector (for reporting; the vector itself is used)."""
        if self.alpha is not None:
            return float(self.alpha)
        rates = self.rates()
        if rates is not None:
            return rates[0]
        tau = jnp.float32(self.accepted_length)
        if self.tree_topk is not None and not (self.tree_topk == 1 and self.tree_tokens == self.k + 1):
            return float(alpha_from_tree_tokens(tau, jnp.float32(self.tree_topk), jnp.float32(self.tree_tokens),
                                                jnp.float32(self.k)))
        return float(alpha_from_tokens(tau, jnp.float32(self.k)))

    def build(self, dtype=jnp.float32):
        """Load presets and return `(Hardware, Deployment, target Model, draft Model, Decode)` pytrees.

        Cached per (scenario, dtype): validation, memory checks and evaluation share one load."""
        return _build(self, jnp.dtype(dtype), bool(jax.config.jax_enable_x64), _files(self))

    def check(self):
        """Load every preset or file the scenario names and check it against the deployment (tensor
        parallelism, drafter); returns (HardwareProfile, target Architecture, draft Architecture | None)."""
        return _check(self, _files(self))

    def _check(self):
        kind = drafters.get(self.drafter, self.source)
        profile = _hw.load(self.hardware)
        profile.resolve(self.compute_dtype)  # a peak for the compute dtype exists
        if self.engine is not None:
            profile = engines.load(self.engine).apply(profile)
        arch = _models.load_architecture(self.target)
        check_layout(arch, self.target, self.tp, self.ep, self.dp_attention, self.source)
        gpus = self.tp * self.dp_attention
        check_draft_tp(self.draft_tp, gpus, self.source)
        layout = (self.tp, self.ep, self.dp_attention) if self.draft_tp is None else (self.draft_tp, 1, 1)
        if self.drafter == "mtp" and self.draft_tp is not None:
            check_layout(arch, f"the MTP layer of {self.target}", *layout, self.source, role="draft")
        draft_arch = None
        if kind.needs_draft:
            draft_arch = _models.load_architecture(self.draft)
            check_layout(draft_arch, self.draft, *layout, self.source, role="draft")
            if kind.check_pair:
                kind.check_pair(arch, draft_arch)
        if kind.check:
            kind.check(arch)
        return profile, arch, draft_arch

    def _build(self, dtype):
        kind = drafters.get(self.drafter, self.source)
        profile, arch, draft_arch = self.check()
        hw = profile.resolve(self.compute_dtype, dtype, self.roofline)
        dts = dict(weight_dtype=self.weight_dtype, expert_dtype=self.expert_dtype, kv_dtype=self.kv_dtype, dtype=dtype)
        tgt = _models.target(arch, **dts)
        draft = kind.build(arch, draft_arch, dts)
        as_dt = lambda v: jnp.asarray(v, dtype)  # noqa: E731
        deploy = Deployment(tp=as_dt(self.tp), memory_fraction=as_dt(self.memory_fraction), ep=as_dt(self.ep),
                            dp_attention=as_dt(self.dp_attention), draft_tp=as_dt(self.draft_tp or 0),
                            expert_imbalance=as_dt(self.expert_imbalance))
        rates = self.rates()
        tree = {} if self.tree_topk is None else dict(tree_topk=as_dt(self.tree_topk),
                                                      tree_tokens=as_dt(self.tree_tokens), tree_max_depth=int(self.k))
        dec = Decode(batch=as_dt(self.batch), k=as_dt(self.k), alpha=as_dt(self.resolved_alpha()),
                     context=as_dt(self.context), draft_cost_ratio=as_dt(self.draft_cost if kind.cost_ratio else 0.0),
                     expert_locality=as_dt(self.expert_locality),
                     draft_kv_budget=None if self.draft_kv_budget is None else as_dt(self.draft_kv_budget),
                     rates=None if rates is None else jnp.asarray(rates, dtype), load=self.load(dtype), **tree)
        return hw, deploy, tgt, draft, dec


def _files(scenario):
    """(path, mtime, size) of every file the scenario names: part of the cache keys, so an edited file
    is read again."""
    out = []
    for name in (scenario.hardware, scenario.target, scenario.draft, scenario.engine):
        p = pathlib.Path(str(name)) if name else None
        try:
            st = p.stat() if p is not None and p.is_file() else None
        except OSError:  # a name the file system cannot hold is not a file: the loaders say so
            st = None
        if st is not None:
            out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _check(scenario, files):
    del files  # part of the cache key only
    return scenario._check()


@functools.lru_cache(maxsize=256)
def _build(scenario, dtype, x64, files):
    del x64, files  # part of the cache key only: the same dtype request gives other arrays when x64 is off
    return scenario._build(dtype)
