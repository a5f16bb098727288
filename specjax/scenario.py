"""A validated operating point in plain Python values, and its conversion to kernel pytrees.

`Scenario` is what the CLI and sweep specs produce: labels (preset slugs or file paths) and
numbers, checked at construction with messages naming the field, the value and the allowed
range. `Scenario.build()` loads the presets and returns `(Hardware, Model, Model, Decode)`.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from . import hardware as _hw
from . import models as _models
from .acceptance import alpha_from_tokens
from .dtypes import COMPUTE_DTYPES
from .errors import SpecError, field_error
from .roofline import MODES
from .speculative import Decode

DRAFTERS = ("model", "eagle", "mtp", "ngram", "ratio")
K_MAX = 64


def check_tp(arch, tp, name, source=None):
    """Tensor parallelism shards heads and FFN widths: each must divide by tp (KV heads may be
    replicated when there are fewer than tp)."""
    if arch.n_heads % tp:
        raise field_error("tp", tp, f"a divisor of the {arch.n_heads} attention heads of {name}", source)
    kv = arch.n_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise field_error("tp", tp, f"a divisor or multiple of the {kv} KV heads of {name}", source)
    if arch.n_moe_layers and arch.expert_width % tp:
        raise field_error("tp", tp, f"a divisor of the expert width {arch.expert_width} of {name}", source)
    if arch.n_dense_ffn_layers and arch.dense_ffn_width % tp:
        raise field_error("tp", tp, f"a divisor of the FFN width {arch.dense_ffn_width} of {name}", source)


def _num(name, v, allowed, ok, source):
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise field_error(name, v, allowed, source)
    return v


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One operating point. Exactly one of `alpha` and `accepted_length` is given."""

    target: str
    hardware: str
    drafter: str = "ratio"
    draft: str | None = None
    draft_cost: float | None = None
    tp: int = 1
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
    source: str | None = None

    def __post_init__(self):
        src = self.source
        if self.drafter not in DRAFTERS:
            raise field_error("drafter", self.drafter, f"one of {', '.join(DRAFTERS)}", src)
        if self.roofline not in MODES:
            raise field_error("roofline", self.roofline, f"one of {', '.join(MODES)}", src)
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise field_error("compute_dtype", self.compute_dtype, f"one of {', '.join(COMPUTE_DTYPES)}", src)
        _num("batch", self.batch, "1 <= batch <= 1e8 (sequences)", lambda v: 1 <= v <= 1e8, src)
        _num("k", self.k, f"0 <= k <= {K_MAX} (draft tokens per step)", lambda v: 0 <= v <= K_MAX, src)
        _num("context", self.context, "0 <= context <= 1e8 (tokens)", lambda v: 0 <= v <= 1e8, src)
        _num("tp", self.tp, "an integer >= 1 (GPUs per replica)", lambda v: v >= 1 and float(v).is_integer(), src)
        _num("memory_fraction", self.memory_fraction, "0 < u <= 1", lambda v: 0 < v <= 1, src)
        if (self.alpha is None) == (self.accepted_length is None):
            raise SpecError("give exactly one of alpha and accepted_length"
                            + (f" in {src}" if src else ""))
        if self.alpha is not None:
            _num("alpha", self.alpha, "0 <= alpha <= 1", lambda v: 0 <= v <= 1, src)
        else:
            _num("accepted_length", self.accepted_length, f"1 <= tau <= k+1 = {self.k + 1:g}",
                 lambda v: 1 <= v <= self.k + 1, src)
        if self.drafter in ("model", "eagle") and not self.draft:
            raise SpecError(f"drafter={self.drafter!r} needs a draft model or head (--draft)"
                            + (f" in {src}" if src else ""))
        if self.drafter == "ratio":
            _num("draft_cost", self.draft_cost, "0 <= c <= 10 (draft pass / target pass)",
                 lambda v: 0 <= v <= 10, src)

    def memory_error(self):
        """A message if the weights of target and drafter alone exceed tp x HBM x memory_fraction, else None."""
        hw, tgt, draft, _ = self.build()
        weights = float(tgt.weight_bytes + draft.weight_bytes)
        budget = self.tp * float(hw.hbm_bytes) * self.memory_fraction
        if weights <= budget:
            return None
        return (f"the weights of {self.target}" + (f" + {self.draft}" if self.draft else "")
                + f" ({weights / 1e9:.1f} GB) do not fit in tp={self.tp} x {float(hw.hbm_bytes) / 1e9:.0f} GB x "
                f"memory_fraction={self.memory_fraction:g} = {budget / 1e9:.1f} GB; expected weights <= budget "
                "(raise --tp, lower --weight-dtype, or pass --ignore-memory)")

    def resolved_alpha(self):
        """alpha, solved from the accepted length where that was given."""
        if self.alpha is not None:
            return float(self.alpha)
        return float(alpha_from_tokens(jnp.float32(self.accepted_length), jnp.float32(self.k)))

    def build(self, dtype=jnp.float32):
        """Load presets and return `(Hardware, target Model, draft Model, Decode)` pytrees.

        Cached per (scenario, dtype): validation, memory checks and evaluation share one load."""
        return _build(self, jnp.dtype(dtype), bool(jax.config.jax_enable_x64))

    def _build(self, dtype):
        hw = _hw.load(self.hardware).resolve(self.compute_dtype, dtype)
        arch = _models.load_architecture(self.target)
        check_tp(arch, self.tp, self.target, self.source)
        dts = dict(weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype, dtype=dtype)
        tgt = _models.target(arch, expert_dtype=self.expert_dtype, **dts)
        if self.drafter == "model":
            draft_arch = _models.load_architecture(self.draft)
            check_tp(draft_arch, self.tp, self.draft, self.source)
            draft = _models.target(draft_arch, **dts)
        elif self.drafter == "eagle":
            head = _models.load_architecture(self.draft)
            check_tp(head, self.tp, self.draft, self.source)
            draft = _models.eagle_head(head, arch, **dts)
        elif self.drafter == "mtp":
            if not arch.mtp_layers:
                raise field_error("drafter", "mtp", f"a target with MTP layers ({self.target} has none)",
                                  self.source)
            draft = _models.mtp_head(arch, expert_dtype=self.expert_dtype, **dts)
        else:
            draft = _models.Model.zeros(dtype)
        dec = Decode(**{k: jnp.asarray(v, dtype) for k, v in dict(
            batch=self.batch, k=self.k, alpha=self.resolved_alpha(), context=self.context, tp=self.tp,
            draft_cost_ratio=self.draft_cost if self.drafter == "ratio" else 0.0,
            memory_fraction=self.memory_fraction).items()})
        return hw, tgt, draft, dec


@functools.lru_cache(maxsize=256)
def _build(scenario, dtype, x64):
    del x64  # part of the cache key only: the same dtype request gives other arrays when x64 is off
    return scenario._build(dtype)
