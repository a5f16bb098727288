"""A validated operating point in plain Python values, and its conversion to kernel pytrees.

`Scenario` is what the CLI, sweep specs, measurement rows and the Python API produce: one field per
input of the catalogue that a scenario carries (`catalogue.SCENARIO`), checked at construction with
messages naming the field, the value and the allowed range. `Scenario.build()` loads the presets and
returns `(Hardware, Deployment, target Model, draft Model, Decode)`.
"""

import dataclasses
import functools
import operator
import os
import pathlib
import stat

import jax
import jax.numpy as jnp
import numpy as np

from .. import catalogue
from . import drafters, engines, scheduler
from . import hardware as _hw
from . import models as _models
from ..cost.acceptance import (TREE_MAX_DEPTH, alpha_from_tokens, alpha_from_tree_tokens, conditional_rates,
                               max_tree_tau, max_tree_tokens)
from ..errors import SpecError, field_error, path_exists, unknown_name
from ..cost.memory import weights_per_gpu
from ..cost.trees import Decode, Deployment, Load

ACCEPTANCE = ("alpha", "accepted_length", "acceptance_vector", "position_rates")  # give exactly one
FREE = ("batch", "k", "alpha", "context")  # inputs that can be one Decode leaf and nothing else (`Scenario.free`)


def check_layout(arch, name, tp, ep=1, dp_attention=1, source=None, role="target"):
    """A layout shards heads by tp, dense FFN widths by the replica's tp x dp_attention GPUs, experts by
    ep and each expert's width by the GPUs per expert group (docs/model.md §2.4): each must divide (KV heads
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


def _fields():
    """`Scenario`'s fields, in catalogue order: one per `catalogue.SCENARIO` row, its default the row's; the
    two required ones (target, hardware) first and positional, the rest keyword-only; then `source`."""
    rows = list(catalogue.SCENARIO.values())
    rows.sort(key=lambda r: r.default is not catalogue.REQUIRED)
    out = []
    for r in rows:
        if r.default is catalogue.REQUIRED:
            out.append((r.name, object))
        else:
            out.append((r.name, object, dataclasses.field(default=r.default, kw_only=True)))
    return out + [("source", object, dataclasses.field(default=None, kw_only=True))]


class _Scenario:
    """One operating point: labels (preset slugs or file paths) and numbers, one field per input of the
    catalogue that a scenario carries (`catalogue.SCENARIO`, with the catalogue's defaults), checked at
    construction with messages naming the field, the value and the allowed range. Exactly one of `alpha`,
    `accepted_length`, `acceptance_vector` and `position_rates` is given. `engine` names an engine
    profile (`engines.load`: a preset slug, `roofline` for the pure model, or a TOML path); the default,
    and what None means, is the CLI's and the sweep specs' (`engines.DEFAULT`): the engine terms of every
    scenario come from its engine profile (a hardware file cannot carry them). `source` names the file the
    values came from (for messages). `Scenario.build()` loads the presets and returns the kernel pytrees."""

    def __post_init__(self):
        src = self.source
        if self.engine is None:  # one input-application path: engine terms come from an engine profile only
            object.__setattr__(self, "engine", engines.DEFAULT)
        for row in catalogue.SCENARIO.values():  # per-field checks, all from the catalogue
            value = getattr(self, row.name)
            if value is None and row.default is catalogue.REQUIRED:
                raise field_error(row.name, value, row.help.split(": ", 1)[-1].rstrip("."), src)
            if value is not None:
                checked = row.check_value(value, src)
                if checked is not value:  # normalised (an integer input given as 2.0, a list of rates)
                    object.__setattr__(self, row.name, checked)
        _names_known(self, src)  # a mistyped name is the first error, before any rule between inputs
        kind = drafters.get(self.drafter, src)
        for rule in (_one_acceptance, _position_rates_fall, _drafter_takes, _tree_shape, _load_lengths):
            rule(self, kind, src)

    @property
    def has_load(self):
        """True when the scenario carries a serving load (docs/model.md §10): input and output lengths given."""
        return self.input_len is not None

    def load(self, dtype=jnp.float32):
        """The `Load` pytree (None without a serving load); an unset rate is a placeholder 1 request/s,
        max_num_seqs and chunk_tokens not given are the engine's scheduler defaults (`scheduler_limits`)."""
        if not self.has_load:
            return None
        values = {f.name: f.default for f in dataclasses.fields(Load) if f.default is not dataclasses.MISSING}
        values.update({"qps": 1.0}, **{n: getattr(self, n) for n in catalogue.LOAD if getattr(self, n) is not None})
        values.update({n: v for n, (v, _) in self.scheduler_limits().items()})
        return Load(**{n: np.asarray(v, dtype) for n, v in values.items()})

    def scheduler_limits(self):
        """{"max_num_seqs", "chunk_tokens": (value, where it came from)}: the value given, else the engine
        profile's scheduler default on this GPU for a speculative server (k >= 1; `inputs.scheduler`)."""
        return _limits(self, _files(self))

    def replace_acceptance(self, **kw):
        """A copy with the acceptance given another way (one of alpha, accepted_length, a vector)."""
        none = dict.fromkeys(ACCEPTANCE)
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

    def resolved_alpha(self, dtype=jnp.float32):
        """alpha: given, solved from the accepted length (through the tree estimate for a tree), or the
        first conditional rate of a per-position vector (for reporting; the vector itself is used). The
        solve runs in `dtype`, the build's (float64 under x64 when the build asks for it)."""
        if self.alpha is not None:
            return float(self.alpha)
        rates = self.rates()
        if rates is not None:
            return rates[0]
        tau, as_dt = jnp.asarray(self.accepted_length, dtype), lambda v: jnp.asarray(v, dtype)  # noqa: E731
        if self.tree_topk is not None and not (self.tree_topk == 1 and self.tree_tokens == self.k + 1):
            return float(alpha_from_tree_tokens(tau, as_dt(self.tree_topk), as_dt(self.tree_tokens), as_dt(self.k)))
        return float(alpha_from_tokens(tau, as_dt(self.k)))

    def free(self):
        """The inputs of `FREE` that, in this scenario, are their `Decode` leaf and nothing else: batch and
        context always, alpha where it is given as alpha, k unless it is a tree's depth or solves alpha from an
        accepted length. Two scenarios of one `structure()` build the same pytrees but for these leaves, and
        pass `check()` alike but for the checks that read them (`check_free`)."""
        out = ["batch", "context"]
        if self.alpha is not None:
            out.append("alpha")
        if self.tree_topk is None and self.accepted_length is None:
            out.append("k")
        return tuple(n for n in FREE if n in out)

    def structure(self, k=None):
        """What a build depends on besides the `free()` leaves: every other field's value, and whether k >= 1
        (a serving load's scheduler defaults are a speculative server's; `k`: this one in place of the
        scenario's). Computed once per scenario (it is immutable)."""
        kept = self.__dict__.get("_structure")
        if kept is None:
            free = self.free()
            kept = self.__dict__["_structure"] = (free, _others(type(self), free)(self))
        return kept[0], (self.k if k is None else k) >= 1, kept[1]

    def build(self, dtype=jnp.float32):
        """Load presets and return `(Hardware, Deployment, target Model, draft Model, Decode)` pytrees.

        Cached per (scenario, dtype): validation, memory checks and evaluation share one load."""
        return _build(self, jax.dtypes.canonicalize_dtype(dtype), bool(jax.config.jax_enable_x64), _files(self))

    def files(self):
        """(path, mtime, size) of every file the scenario names (part of every cache key of a build)."""
        return _files(self)

    def check(self):
        """Load every preset or file the scenario names and check it against the deployment (tensor
        parallelism, drafter); returns (HardwareProfile, target Architecture, draft Architecture | None)."""
        return _check(self, _files(self))

    def _check(self):
        kind = drafters.get(self.drafter, self.source)
        profile = _hw.load(self.hardware)
        profile.resolve(self.compute_dtype)  # a peak for the compute dtype exists
        profile = engines.load(self.engine).apply(profile)
        arch = _models.load_architecture(self.target)
        check_layout(arch, self.target, self.tp, self.ep, self.dp_attention, self.source)
        gpus = self.tp * self.dp_attention
        check_draft_tp(self.draft_tp, gpus, self.source)
        if self.expert_imbalance != 1 and self.ep == 1:  # inert in the kernels without EP: refuse, not ignore
            raise field_error("expert_imbalance", self.expert_imbalance, "1 unless --ep > 1 (without expert "
                              "parallelism every GPU holds a slice of every expert: no rank is busier)", self.source)
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
        self.check_free(arch, draft_arch)
        return profile, arch, draft_arch

    def check_free(self, arch, draft_arch, k=None, context=None):
        """The checks of `check` that read a `free()` input: a DFlash drafter's block holds the last verified
        token and the k drafts; the sequence fits the models' positions. `api.point` runs these alone for new
        values of a checked structure (`k`, `context`: these in place of the scenario's), so every check of a
        build that reads batch, k, alpha or context belongs here, not in `_check`."""
        k = self.k if k is None else k
        if draft_arch is not None and drafters.get(self.drafter, self.source).parallel and draft_arch.block_size \
                and k > draft_arch.block_size - 1:
            raise field_error("k", k, f"1 <= k <= {draft_arch.block_size - 1}: the DFlash drafter {self.draft!r} "
                              f"fills a block of {draft_arch.block_size} tokens, the first the last verified one",
                              self.source)
        for a, name in ((arch, self.target), (draft_arch if self.drafter == "model" else None, self.draft)):
            _fits_context(self, a, name, context)

    def _build(self, dtype):
        kind = drafters.get(self.drafter, self.source)
        profile, arch, draft_arch = self.check()
        hw = profile.resolve(self.compute_dtype, dtype, self.roofline)
        dts = dict(weight_dtype=self.weight_dtype, expert_dtype=self.expert_dtype, kv_dtype=self.kv_dtype, dtype=dtype)
        tgt = _models.target(arch, **dts)
        draft = kind.build(arch, draft_arch, dts)
        as_dt = lambda v: np.asarray(v, dtype)  # noqa: E731  (host arrays: building a point dispatches nothing)
        values = dict(alpha=self.resolved_alpha(dtype), draft_cost=self.draft_cost if kind.cost_ratio else 0.0,
                      draft_tp=self.draft_tp or 0,  # the inputs a scenario gives in another form than the leaf
                      draft_passes=(self.draft_passes or 1) if kind.parallel else None)  # None: a chain
        leaves = {t: {} for t in catalogue.TREES}
        for row in catalogue.SCENARIO.values():  # every input with a leaf lands in its tree, from the catalogue
            v = values.get(row.name, getattr(self, row.name))
            if row.leaf and v is not None and row.tree != "load":  # the load: `self.load`
                leaves[row.tree][row.leaf] = as_dt(v)
        hw, tgt, draft = (t.replace(**leaves[n]) if leaves[n] else t for t, n in ((hw, "hw"), (tgt, "target"),
                                                                                     (draft, "draft")))
        deploy = Deployment(**leaves["deploy"], parallel=not Deployment.pure_tp(self.ep, self.dp_attention,
                                                                                 self.draft_tp))
        rates = self.rates()
        dec = Decode(**leaves["op"], rates=None if rates is None else np.asarray(rates, dtype), load=self.load(dtype),
                     **({} if self.tree_topk is None else dict(tree_max_depth=int(self.k))))
        return hw, deploy, tgt, draft, dec


def define():
    """The `Scenario` class of the catalogue as it is now (module import defines `Scenario` once; a test
    or plug-in that registers an input calls this for a class that carries it)."""
    cls = dataclasses.make_dataclass("Scenario", _fields(), bases=(_Scenario,), frozen=True)
    cls.__module__, cls.__doc__ = __name__, _Scenario.__doc__
    return cls


Scenario = define()


@functools.cache
def _others(cls, free):
    """A getter of the values of every field of `cls` but `free`, in field order (`Scenario.structure`)."""
    return operator.attrgetter(*(f.name for f in dataclasses.fields(cls) if f.name not in free))


def _in(src):
    return f" in {src}" if src else ""


def _fits_context(sc, arch, name, context=None):
    """The sequence (the context, or a request's prompt and output) fits the model's positions
    (`Architecture.max_context`: max_position_embeddings, RoPE-scaled), where the config gives them;
    `context`: this one in place of the scenario's."""
    if arch is None or not arch.max_context:
        return
    context = sc.context if context is None else context
    field, n = ("input_len", sc.input_len + sc.output_len) if sc.has_load else ("context", context)
    if n > arch.max_context:
        what = "input_len + output_len" if sc.has_load else "context"
        raise field_error(field, n if field == "context" else sc.input_len, f"{what} <= {arch.max_context} tokens, the "
                          f"max_position_embeddings of {name} (a longer sequence than the model takes; add its "
                          "rope_scaling to the config if it is served with one)", sc.source)


def _names_known(sc, src):
    """Every preset-or-file name resolves: a file path (or a name with the file's suffix, which its loader
    then reads) or a preset slug; else the loader's one-line error with close matches ("did you mean")."""
    for field, kind, slugs, suffix in (("target", "model", _model_slugs, ".json"), ("draft", "model", _model_slugs,
                                                                                    ".json"),
                                       ("hardware", "hardware", _hardware_slugs, ".toml"),
                                       ("engine", "engine", _engine_slugs, ".toml")):
        name = getattr(sc, field)
        if name is None or str(name) in slugs() or str(name).endswith(suffix) or path_exists(str(name)):
            continue  # a preset name first (a set: no file-system call), then a file
        raise unknown_name(kind, name, slugs(), src)


@functools.cache
def _model_slugs():
    return frozenset(_models.preset_slugs())


@functools.cache
def _hardware_slugs():
    return frozenset(_hw.preset_slugs())


@functools.cache
def _engine_slugs():
    return frozenset(engines.preset_slugs())


def _one_acceptance(sc, kind, src):
    """Exactly one way of giving acceptance; an accepted length at most k + 1."""
    given = [n for n in ACCEPTANCE if getattr(sc, n) is not None]
    if len(given) != 1:
        raise SpecError("give exactly one of alpha, accepted_length, acceptance_vector and position_rates"
                        + (f" (got {', '.join(given)})" if given else "") + _in(src))
    if sc.accepted_length is not None and sc.accepted_length > sc.k + 1:
        raise field_error("accepted_length", sc.accepted_length, f"1 <= tau <= k+1 = {sc.k + 1:g}", src)


def _position_rates_fall(sc, kind, src):
    """vLLM's per-position rates are shares accepted up to each position: non-increasing."""
    vec = sc.position_rates
    if vec is not None and any(b > a for a, b in zip(vec, vec[1:])):
        raise field_error("position_rates", list(vec), "non-increasing rates (vLLM's per-position acceptance is "
                          "the share of drafts accepted up to each position; for conditional rates use "
                          "acceptance_vector)", src)


def _drafter_takes(sc, kind, src):
    """What the drafter kind needs and takes: a draft model, a cost ratio, a KV budget, its own TP, passes."""
    for name in ("draft_tp", "draft_kv_budget"):
        if getattr(sc, name) is not None and not kind.runs_model:
            raise SpecError(f"{name}={getattr(sc, name)} is for a drafter that runs a model; drafter="
                            f"{sc.drafter!r} runs none" + _in(src))
    if sc.draft_passes is not None and not kind.parallel:
        raise SpecError(f"draft_passes={sc.draft_passes} is for a parallel drafter (drafter=parallel); drafter="
                        f"{sc.drafter!r} makes k sequential passes" + _in(src))
    if kind.needs_kv_budget and sc.draft_kv_budget is None:
        raise SpecError(f"drafter={sc.drafter!r} needs draft_kv_budget (--draft-kv-budget: the tokens of KV "
                        "the drafter keeps, e.g. 512; MagicDec uses 256-2048)" + _in(src))
    if kind.needs_draft and not sc.draft:
        raise SpecError(f"drafter={sc.drafter!r} needs a draft model or head (--draft)" + _in(src))
    if sc.draft and not kind.needs_draft:
        needing = " or ".join(n for n, k in drafters.REGISTRY.items() if k.needs_draft)
        raise SpecError(f"draft={sc.draft!r} is used only with drafter = {needing} (--drafter); "
                        f"drafter={sc.drafter!r} takes no draft" + _in(src))
    if kind.cost_ratio:
        if sc.draft_cost is None:
            runs = ", ".join(n for n, k in drafters.REGISTRY.items() if not k.cost_ratio)
            default = " (the default)" if sc.drafter == catalogue.INPUTS["drafter"].default else ""
            allowed = catalogue.INPUTS["draft_cost"].range_text()
            raise SpecError(f"drafter={sc.drafter!r}{default} needs draft_cost (--draft-cost, {allowed}), or choose "
                            f"another drafter (--drafter {runs})" + _in(src))
        catalogue.check("draft_cost", sc.draft_cost, src)


def _tree_shape(sc, kind, src):
    """A draft tree: both keys, a drafter that runs a model, a depth the estimate covers, a token count
    between a chain's k + 1 and the full tree's."""
    if (sc.tree_topk is None) != (sc.tree_tokens is None):
        raise SpecError("give both tree_topk and tree_tokens for a draft tree (--tree-topk, --tree-tokens)"
                        + _in(src))
    if sc.tree_topk is None:
        return
    if not kind.runs_model:
        raise SpecError(f"a draft tree needs a drafter that runs a model; drafter={sc.drafter!r} runs none"
                        + _in(src))
    if kind.parallel:
        raise SpecError("a draft tree needs a chain drafter; drafter='parallel' proposes one block of k tokens"
                        + _in(src))
    if not float(sc.k).is_integer() or sc.k < 1:
        raise field_error("k", sc.k, "an integer >= 1: the tree depth (draft steps)", src)
    if sc.tree_topk > 1 and sc.k > TREE_MAX_DEPTH:
        raise field_error("k", sc.k, f"a tree depth <= {TREE_MAX_DEPTH} (the deepest tree the tau estimate "
                          "covers)", src)
    most = float(max_tree_tokens(sc.tree_topk, sc.k))
    least = sc.k + 1
    if sc.tree_topk == 1 and sc.tree_tokens != least:
        raise field_error("tree_tokens", sc.tree_tokens, f"k + 1 = {least:g} for tree_topk = 1 (a chain)", src)
    if not least <= sc.tree_tokens <= most:
        raise field_error("tree_tokens", sc.tree_tokens, f"{least:g} <= tree_tokens <= {most:g} for depth k = "
                          f"{sc.k:g} and topk {sc.tree_topk} (root included)", src)
    if sc.accepted_length is not None:
        msg = tree_tau_error(sc.accepted_length, sc.tree_topk, sc.tree_tokens, sc.k)
        if msg:
            raise field_error("accepted_length", sc.accepted_length, msg, src)


def tree_tau_error(tau, topk, tokens, k):
    """What a measured tree tau must satisfy, or None when it does: at most the tree estimate's tau at alpha
    = 1 (`max_tree_tau`), so that the alpha solved through the estimate reproduces it exactly (a longer tau
    would be clipped to that ceiling). Shared by scenarios and measurement rows."""
    if topk == 1 and tokens == k + 1:  # a chain: any tau <= k + 1 (checked with the acceptance)
        return None
    ceiling = float(max_tree_tau(float(topk), float(tokens), float(k)))
    if tau <= ceiling * (1 + 1e-5):  # float32's rounding of the ceiling
        return None
    return (f"1 <= tau <= {ceiling:.4g}: the longest accepted length the tree estimate gives topk {topk:g}, "
            f"{tokens:g} tokens, depth k = {k:g} (alpha = 1; some depth keeps fewer candidates than the nodes "
            "above it); a longer measured tau cannot be reproduced, only clipped")


def _load_lengths(sc, kind, src):
    """A serving load needs both lengths."""
    given = [n for n in catalogue.LOAD if getattr(sc, n) is not None]
    if given and (sc.input_len is None or sc.output_len is None):
        raise SpecError(f"a serving load needs input_len and output_len (--input-len, --output-len; got "
                        f"{', '.join(given)})" + _in(src))


def _files(scenario):
    """(path, mtime, size) of every file the scenario names: part of the cache keys, so an edited file
    is read again."""
    out = []
    for name in (scenario.hardware, scenario.target, scenario.draft, scenario.engine):
        if not name:
            continue
        p = _path(str(name))
        try:  # `access` first: a preset name is no file, and says so without raising (3x cheaper than `stat`)
            if not os.access(p, os.F_OK):
                continue
            st = os.stat(p)
        except (OSError, ValueError):  # not a file (a preset name), or a name the file system cannot hold
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((p, st.st_mtime_ns, st.st_size))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _path(name):
    """The path a name is read from, as `pathlib` spells it."""
    return str(pathlib.Path(name))


@functools.lru_cache(maxsize=256)
def _check(scenario, files):
    del files  # part of the cache key only
    return scenario._check()


@functools.lru_cache(maxsize=256)
def _limits(scenario, files):
    del files  # part of the cache key only
    engine = engines.load(scenario.engine)
    given = {n: getattr(scenario, n) for n in scheduler.NAMES}
    return scheduler.resolve(engine, engines.load(engines.DEFAULT), scenario.check()[0], scenario.k >= 1, given)


@functools.lru_cache(maxsize=256)
def _build(scenario, dtype, x64, files):
    del x64, files  # part of the cache key only: the same dtype request gives other arrays when x64 is off
    return scenario._build(dtype)
