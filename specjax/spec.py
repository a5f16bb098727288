"""Sweep specs: TOML files in `sweeps/`, validated into a frozen `SweepSpec`.

A spec names categorical axes (hardware presets or files; target/drafter pairs), scalar
inputs shared by all points (`[fixed]`), numeric axes (`[axes]`, each a list or
`{start, stop, num, scale = "log" | "linear"}`), an optional on-device reduction
(`[reduce] kind = "none" | "crossover" | "best_k" | "max_speedup"`) and optional
`[sensitivity]` / `[optimize]` sections. Every error names the file, the field, the value and
the allowed range; nothing is written before the whole spec has been validated.
"""

import dataclasses
import hashlib
import pathlib
import re
import tomllib

import numpy as np

from . import axes as _axes
from .dtypes import canonical
from .errors import SpecError, field_error, read_text, unknown_name
from .scenario import DRAFTERS, Scenario
from .sensitivity import INPUTS as SENSITIVITY_INPUTS

REDUCE = ("none", "crossover", "best_k", "max_speedup")
TOP_KEYS = {"name", "description", "roofline", "compute_dtype", "chunk_size", "experts_hold", "hardware", "pairs",
            "fixed", "axes", "reduce", "sensitivity", "optimize"}
PAIR_KEYS = {"target", "drafter", "draft", "draft_cost", "weight_dtype", "expert_dtype", "kv_dtype", "label", "tp"}
FIXED_STR = {"weight_dtype", "expert_dtype", "kv_dtype"}
MAX_AXIS = 10_000_000
LABEL = re.compile(r"[A-Za-z0-9._+-]{1,120}")


@dataclasses.dataclass(frozen=True)
class Pair:
    """A target/drafter combination (one categorical value)."""

    target: str
    drafter: str
    draft: str | None = None
    draft_cost: float | None = None
    weight_dtype: str | None = None
    expert_dtype: str | None = None
    kv_dtype: str | None = None
    tp: int | None = None
    label: str = ""


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated sweep. `axes` maps numeric input name -> tuple of values (float)."""

    name: str
    source: str
    text: str
    hardware: tuple
    pairs: tuple
    fixed: dict
    axes: dict
    roofline: str = "operator"
    compute_dtype: str = "bf16"
    chunk_size: int = 65536
    experts_hold: str = "expert_size"
    reduce: str = "none"
    batch_max: float = 65536.0
    batch_points: int = 96
    sensitivity: tuple = ()
    k_max: int = 0
    k_method: str = "optax"
    description: str = ""

    @property
    def sha256(self):
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def rows_per_combo(self):
        """Output rows per (hardware, pair): product of the numeric axis sizes (reduced axes excluded)."""
        return int(np.prod([len(v) for n, v in self.axes.items() if not self.reduced(n)], dtype=np.int64))

    @property
    def combos(self):
        return [(h, p) for h in self.hardware for p in self.pairs]

    @property
    def rows(self):
        return self.rows_per_combo * len(self.combos)

    @property
    def points(self):
        """Configurations evaluated: rows x the batch grid of a crossover / the reduced axis."""
        per_row = 1
        if self.reduce == "crossover":
            per_row = self.batch_points
        elif self.reduce == "max_speedup":
            per_row = len(self.axes["batch"])
        elif self.reduce == "best_k":
            per_row = self.k_max
        return self.rows * per_row

    def reduced(self, name):
        return self.reduce == "max_speedup" and name == "batch"

    def scenario(self, hardware, pair):
        """The base `Scenario` of one categorical combination (axis values override it)."""
        fx = {k: v for k, v in self.fixed.items() if k not in ("alpha", "accepted_length")}
        fx["alpha"] = 0.5  # placeholder: alpha / accepted_length are always axes, set per point
        for key in ("weight_dtype", "expert_dtype", "kv_dtype", "tp"):
            if getattr(pair, key):
                fx[key] = getattr(pair, key)
        return Scenario(target=pair.target, hardware=hardware, drafter=pair.drafter, draft=pair.draft,
                        draft_cost=pair.draft_cost if pair.drafter == "ratio" else None,
                        roofline=self.roofline, compute_dtype=self.compute_dtype, source=self.source, **fx)


def _axis_values(name, raw, src):
    field = f"axes.{name}"
    if isinstance(raw, list):
        if not raw:
            raise field_error(field, raw, "a non-empty list or {start, stop, num, scale}", src)
        vals = raw
    elif isinstance(raw, dict):
        extra = set(raw) - {"start", "stop", "num", "scale"}
        if extra:
            raise unknown_name(f"key in {field}", sorted(extra)[0], ["start", "stop", "num", "scale"], src)
        for key in ("start", "stop", "num"):
            if key not in raw:
                raise SpecError(f"missing key {key!r} in {field} in {src}")
        num, scale = raw["num"], raw.get("scale", "linear")
        if isinstance(num, bool) or not isinstance(num, int) or not 1 <= num <= MAX_AXIS:
            raise field_error(f"{field}.num", num, f"an integer in [1, {MAX_AXIS}]", src)
        if scale not in ("linear", "log"):
            raise field_error(f"{field}.scale", scale, "'linear' or 'log'", src)
        for key in ("start", "stop"):
            if not _axes.in_range(name, raw[key]):
                raise field_error(f"{field}.{key}", raw[key], _axes.range_text(name), src)
        start, stop = float(raw["start"]), float(raw["stop"])
        if stop < start:
            raise field_error(f"{field}.stop", raw["stop"], f">= start ({start:g}); the range is inverted", src)
        if num > 1 and stop == start:
            raise field_error(f"{field}", raw, "start < stop when num > 1 (empty range)", src)
        if scale == "log":
            if start <= 0:
                raise field_error(f"{field}.start", raw["start"], "> 0 for scale = 'log'", src)
            vals = np.geomspace(start, stop, num).tolist()
        else:
            vals = np.linspace(start, stop, num).tolist()
    else:
        raise field_error(field, raw, "a list of numbers or {start, stop, num, scale}", src)
    for v in vals:
        if not _axes.in_range(name, v):
            raise field_error(field, v, _axes.range_text(name), src)
    if len(set(vals)) != len(vals):
        raise field_error(field, raw, "distinct values", src)
    return tuple(float(v) for v in vals)


def _table(data, key, src):
    v = data.get(key, {})
    if not isinstance(v, dict):
        raise field_error(key, v, "a table", src)
    return v


def _pair(raw, i, src):
    field = f"pairs[{i}]"
    if not isinstance(raw, dict):
        raise field_error(field, raw, "a table with target and drafter", src)
    extra = set(raw) - PAIR_KEYS
    if extra:
        raise unknown_name(f"key in {field}", sorted(extra)[0], PAIR_KEYS, src)
    for key in ("target", "drafter"):
        if not isinstance(raw.get(key), str):
            raise field_error(f"{field}.{key}", raw.get(key), "a string", src)
    if raw["drafter"] not in DRAFTERS:
        raise field_error(f"{field}.drafter", raw["drafter"], f"one of {', '.join(DRAFTERS)}", src)
    if "tp" in raw and not _axes.in_range("tp", raw["tp"]):
        raise field_error(f"{field}.tp", raw["tp"], _axes.range_text("tp"), src)
    names = (raw["target"], raw["drafter"], raw.get("draft"))
    label = raw.get("label") or "+".join(pathlib.Path(x).stem if x.endswith(".json") else x for x in names if x)
    if not isinstance(label, str) or not LABEL.fullmatch(label):
        raise field_error(f"{field}.label", label, "letters, digits and . _ + - only (a directory name)", src)
    return Pair(**{k: raw.get(k) for k in PAIR_KEYS - {"label"}}, label=label)


def from_text(text, source="<spec>"):
    """Parse and validate a sweep spec; raises `SpecError` naming the file and field."""
    src = str(source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"malformed TOML in {src}: {e}") from None
    extra = set(data) - TOP_KEYS
    if extra:
        raise unknown_name("top-level key", sorted(extra)[0], TOP_KEYS, src)
    hardware = data.get("hardware")
    if isinstance(hardware, str):
        hardware = [hardware]
    if not isinstance(hardware, list) or not hardware or not all(isinstance(h, str) for h in hardware):
        raise field_error("hardware", data.get("hardware"), "a non-empty list of presets or TOML paths", src)
    pairs_raw = data.get("pairs")
    if not isinstance(pairs_raw, list) or not pairs_raw:
        raise field_error("pairs", pairs_raw, "a non-empty array of [[pairs]] tables", src)
    pairs = tuple(_pair(p, i, src) for i, p in enumerate(pairs_raw))
    if len({p.label for p in pairs}) != len(pairs):
        raise field_error("pairs", [p.label for p in pairs], "distinct labels (add label = ...)", src)
    fixed_raw = _table(data, "fixed", src)
    fixed = {}
    for key, v in fixed_raw.items():
        if key in FIXED_STR:
            fixed[key] = canonical(v, f"fixed.{key}", src)
        elif key in ("batch", "k", "alpha", "accepted_length", "context", "tp", "memory_fraction"):
            if not _axes.in_range(key, v):
                raise field_error(f"fixed.{key}", v, _axes.range_text(key), src)
            fixed[key] = v
        else:
            raise unknown_name("key in [fixed]", key, [*FIXED_STR, "batch", "k", "alpha", "accepted_length",
                                                       "context", "tp", "memory_fraction"], src)
    axes_raw = _table(data, "axes", src)
    axes = {}
    for name, raw in axes_raw.items():
        if name not in _axes.NUMERIC:
            raise unknown_name("axis", name, _axes.NUMERIC, src)
        axes[name] = _axis_values(name, raw, src)
    alpha_sources = [n for n in ("alpha", "accepted_length") if n in axes or n in fixed]
    if len(alpha_sources) != 1 or (alpha_sources[0] in axes and alpha_sources[0] in fixed):
        raise SpecError(f"give exactly one of alpha and accepted_length (in [fixed] or [axes]) in {src}")
    if alpha_sources[0] in fixed:  # acceptance is always an axis (a column of the output)
        axes[alpha_sources[0]] = (float(fixed.pop(alpha_sources[0])),)
    for key in list(fixed):
        if key in axes:
            raise SpecError(f"{key} is both in [fixed] and in [axes] in {src}")
    if "tp" in axes and any(p.tp for p in pairs):
        raise SpecError(f"tp is both a pair key and an axis in {src}")
    if "n_experts" in axes or "top_k" in axes or "expert_granularity" in axes:
        if "expert_granularity" in axes and ("n_experts" in axes or "top_k" in axes):
            raise SpecError(f"axes.expert_granularity cannot be combined with n_experts/top_k in {src}")
    reduce_t = _table(data, "reduce", src)
    extra = set(reduce_t) - {"kind", "batch_max", "batch_points"}
    if extra:
        raise unknown_name("key in [reduce]", sorted(extra)[0], ["kind", "batch_max", "batch_points"], src)
    kind = reduce_t.get("kind", "none")
    if kind not in REDUCE:
        raise field_error("reduce.kind", kind, f"one of {', '.join(REDUCE)}", src)
    batch_max = reduce_t.get("batch_max", 65536.0)
    if not _axes.in_range("batch", batch_max) or batch_max < 2:
        raise field_error("reduce.batch_max", batch_max, "a number in [2, 1e8]", src)
    batch_points = reduce_t.get("batch_points", 96)
    if isinstance(batch_points, bool) or not isinstance(batch_points, int) or not 8 <= batch_points <= 4096:
        raise field_error("reduce.batch_points", batch_points, "an integer in [8, 4096]", src)
    if kind == "crossover" and "batch" in axes:
        raise SpecError(f"axes.batch: the crossover reduction searches the batch itself; remove it in {src}")
    if kind == "max_speedup" and "batch" not in axes:
        raise SpecError(f"reduce.kind='max_speedup' needs a batch axis ([axes] batch) in {src}")
    if kind in ("none", "best_k") and "batch" not in axes and "batch" not in fixed:
        raise SpecError(f"give batch in [fixed] or [axes] (reduce.kind={kind!r}) in {src}")
    opt = _table(data, "optimize", src)
    extra = set(opt) - {"k_max", "method"}
    if extra:
        raise unknown_name("key in [optimize]", sorted(extra)[0], ["k_max", "method"], src)
    k_method = opt.get("method", "optax")
    if k_method not in ("optax", "brute"):
        raise field_error("optimize.method", k_method, "'optax' (gradient search) or 'brute' (every integer k)", src)
    k_max = opt.get("k_max", 16 if ("optimize" in data or kind == "best_k") else 0)
    if ("optimize" in data or kind == "best_k") and (isinstance(k_max, bool) or not isinstance(k_max, int)
                                                     or not 1 <= k_max <= 64):
        raise field_error("optimize.k_max", k_max, "an integer in [1, 64]", src)
    if kind == "best_k" and "k" in axes:
        raise SpecError(f"axes.k: the best_k reduction searches k itself; remove it in {src}")
    sens = _table(data, "sensitivity", src)
    extra = set(sens) - {"inputs"}
    if extra:
        raise unknown_name("key in [sensitivity]", sorted(extra)[0], ["inputs"], src)
    sens_inputs = ()
    if "sensitivity" in data:
        if kind != "crossover":
            raise SpecError(f"[sensitivity] needs reduce.kind = 'crossover' (elasticities of B*) in {src}")
        sens_inputs = sens.get("inputs", list(SENSITIVITY_INPUTS))
        if not isinstance(sens_inputs, list) or not sens_inputs:
            raise field_error("sensitivity.inputs", sens_inputs, "a non-empty list of input names", src)
        for n in sens_inputs:
            if n not in SENSITIVITY_INPUTS:
                raise unknown_name("sensitivity input", n, SENSITIVITY_INPUTS, src)
    chunk = data.get("chunk_size", 65536)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= 1 << 24:
        raise field_error("chunk_size", chunk, "an integer in [1, 16777216]", src)
    hold = data.get("experts_hold", "expert_size")
    if hold not in _axes.EXPERT_HOLD:
        raise field_error("experts_hold", hold, f"one of {', '.join(_axes.EXPERT_HOLD)}", src)
    spec = SweepSpec(
        name=str(data.get("name", pathlib.Path(src).stem)), source=src, text=text, hardware=tuple(hardware),
        pairs=pairs, fixed=fixed, axes=axes, roofline=data.get("roofline", "operator"),
        compute_dtype=data.get("compute_dtype", "bf16"), chunk_size=chunk, experts_hold=hold, reduce=kind,
        batch_max=float(batch_max), batch_points=batch_points, sensitivity=tuple(sens_inputs), k_max=int(k_max),
        k_method=k_method,
        description=str(data.get("description", "")))
    if spec.rows_per_combo > 1 << 40:
        raise field_error("axes", f"{spec.rows_per_combo} rows", "at most 2^40 rows per combination", src)
    for h, p in spec.combos:  # loads every preset and checks every scalar once, before anything runs
        sc = spec.scenario(h, p)
        sc.build()
    return spec


def load(path):
    """Read a sweep spec file (UTF-8 TOML) and validate it."""
    p = pathlib.Path(path)
    return from_text(read_text(p, "sweep spec", 1 << 20), str(p))
