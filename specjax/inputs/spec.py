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
import itertools
import pathlib
import re

import numpy as np

from .. import catalogue
from . import drafters, engines
from ..search import reductions as _reductions
from .dtypes import canonical
from ..errors import SpecError, field_error, parse_toml, read_text, unknown_name
from .scenario import Scenario
from ..cost.trees import layout_divides
TOP_KEYS = {"name", "description", "roofline", "engine", "compute_dtype", "chunk_size", "experts_hold", "hardware",
            "pairs", "fixed", "axes", "reduce", "sensitivity", "optimize"}
LAYOUT = ("tp", "ep", "dp_attention", "draft_tp")  # a pair's deployment layout (docs/model.md §2.4), or an axis each
TREE = ("tree_topk", "tree_tokens")  # a pair's draft-tree shape (docs/model.md §4.4), or [fixed] keys, or axes
VECTORS = ("acceptance_vector", "position_rates")  # per-position acceptance (docs/model.md §4.3): [fixed] or pair keys
MAX_AXIS = 10_000_000
LABEL = re.compile(r"[A-Za-z0-9._+-]{1,120}")


def pair_keys():
    """The keys of a [[pairs]] table: the catalogue's pair inputs and a label."""
    return [*catalogue.PAIR, "label"]


Pair = dataclasses.make_dataclass("Pair", [(n, object, None) for n in catalogue.PAIR] + [("label", str, "")],
                                  frozen=True)
Pair.__module__ = __name__
Pair.__doc__ = "A target/drafter combination (one categorical value): one field per pair key of the catalogue."


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
    engine: str = engines.DEFAULT
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

    def inputs_sha256(self):
        """Hash of everything the results depend on: the spec text, the bytes of every hardware, model
        and engine file (user files or the presets the names resolve to) and the package version. A
        `--resume` with a different hash would mix old and new results."""
        from .. import __version__
        from . import engines as _engines
        from . import hardware as _hardware
        from . import models as _models

        h = hashlib.sha256(self.text.encode())
        h.update(__version__.encode())
        names = [("hardware", n) for n in self.hardware] + [("engine", self.engine)]
        for pair in self.pairs:
            names += [("model", pair.target), ("model", pair.draft), ("engine", pair.engine)]
        dirs = {"hardware": _hardware.PRESET_DIR, "model": _models.PRESET_DIR, "engine": _engines.PRESET_DIR}
        for kind, name in names:
            if not name:
                continue
            candidates = [pathlib.Path(name)] + [dirs[kind] / f"{name}{ext}" for ext in (".toml", ".json")]
            found = next((c for c in candidates if c.is_file()), None)
            h.update(f"{kind}:{name}:".encode() + (found.read_bytes() if found else b"-"))
        return h.hexdigest()

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
    def reduction(self):
        return _reductions.get(self.reduce)

    @property
    def points(self):
        """Configurations evaluated: rows x what the reduction evaluates per row."""
        return self.rows * self.reduction.per_row(self)

    def reduced(self, name):
        """True for an axis the reduction folds into each row (not an output column)."""
        return self.reduction.consumes == name

    def scenario(self, hardware, pair):
        """The base `Scenario` of one categorical combination (axis values override it)."""
        fx = {k: v for k, v in self.fixed.items() if k not in ("alpha", "accepted_length")}
        fx.update({n: getattr(pair, n) for n in catalogue.PAIR if getattr(pair, n) is not None})
        fx["engine"] = pair.engine or self.engine
        if pair.drafter != "ratio":
            fx.pop("draft_cost", None)
        if not any(fx.get(v) for v in VECTORS):
            fx["alpha"] = 0.5  # placeholder: alpha / accepted_length are always axes, set per point
        for key in (*TREE, "draft_kv_budget", "draft_passes"):  # an axis of these needs them in the base point
            if key in self.axes and key not in fx:
                fx[key] = int(self.axes[key][0])
        for key in catalogue.LOAD:  # a load axis: its first value in the base point (the kernel sets each)
            if key in self.axes and key not in fx:
                fx[key] = self.axes[key][0]
        if "tree_tokens" in fx and "tree_topk" not in fx:
            fx["tree_topk"] = 1
        if "tree_topk" in fx and "tree_tokens" not in fx:
            fx["tree_tokens"] = int(fx.get("k", self.axes.get("k", (2,))[0])) + 1
        return Scenario(hardware=hardware, roofline=self.roofline, compute_dtype=self.compute_dtype, source=self.source,
                        **fx)


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
            catalogue.check(name, raw[key], src, f"{field}.{key}")
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
        catalogue.check(name, v, src, field)
    if len(set(vals)) != len(vals):
        raise field_error(field, raw, "distinct values", src)
    if len({float(np.float32(v)) for v in vals}) != len(vals):  # the kernels evaluate in float32
        raise field_error(field, raw if isinstance(raw, dict) else [v for v in vals], "values distinct in float32 "
                          "(the sweep's precision; fewer or wider-spaced values)", src)
    return tuple(float(v) for v in vals)


def _table(data, key, src):
    v = data.get(key, {})
    if not isinstance(v, dict):
        raise field_error(key, v, "a table", src)
    return v


def _engine(name, field, src):
    """An engine preset name or an engine TOML path, loaded once to check it."""
    if not isinstance(name, str):
        raise field_error(field, name, "an engine preset (roofline, vllm, sglang, trtllm) or a TOML path", src)
    engines.load(name)
    return name


def _pair(raw, i, src):
    field = f"pairs[{i}]"
    if not isinstance(raw, dict):
        raise field_error(field, raw, "a table with target and drafter", src)
    keys = pair_keys()
    extra = set(raw) - set(keys)
    if extra:
        raise unknown_name(f"key in {field}", sorted(extra)[0], keys, src)
    raw = dict(raw)
    for key in ("target", "drafter"):
        if key not in raw:
            raise field_error(f"{field}.{key}", None, "a string", src)
    for key, v in raw.items():
        if key != "label":
            raw[key] = catalogue.INPUTS[key].check_value(v, src, f"{field}.{key}")
    drafters.get(raw["drafter"], src, f"{field}.drafter")
    if "engine" in raw:
        _engine(raw["engine"], f"{field}.engine", src)
    names = (raw["target"], raw["drafter"], raw.get("draft"))
    label = raw.get("label") or "+".join(pathlib.Path(x).stem if x.endswith(".json") else x for x in names if x)
    if not isinstance(label, str) or not LABEL.fullmatch(label):
        raise field_error(f"{field}.label", label, "letters, digits and . _ + - only (a directory name)", src)
    return Pair(**{k: raw.get(k) for k in catalogue.PAIR}, label=label)


def _hardware(data, src):
    hardware = data.get("hardware")
    if isinstance(hardware, str):
        hardware = [hardware]
    if not isinstance(hardware, list) or not hardware or not all(isinstance(h, str) for h in hardware):
        raise field_error("hardware", data.get("hardware"), "a non-empty list of presets or TOML paths", src)
    stems = [pathlib.Path(h).stem for h in hardware]  # the partition label of each (hardware=<stem>)
    for h, stem in zip(hardware, stems):
        if not LABEL.fullmatch(stem):
            raise field_error("hardware", h, "a preset or a TOML file whose name has only letters, digits and "
                              ". _ + - (it names a result directory)", src)
    dup = next((st for st in stems if stems.count(st) > 1), None)
    if dup:
        raise field_error("hardware", [h for h, st in zip(hardware, stems) if st == dup],
                          f"distinct names: these share the result directory hardware={dup}; rename one file", src)
    return tuple(hardware)


def _pairs(data, src):
    pairs_raw = data.get("pairs")
    if not isinstance(pairs_raw, list) or not pairs_raw:
        raise field_error("pairs", pairs_raw, "a non-empty array of [[pairs]] tables", src)
    pairs = tuple(_pair(p, i, src) for i, p in enumerate(pairs_raw))
    if len({p.label for p in pairs}) != len(pairs):
        raise field_error("pairs", [p.label for p in pairs], "distinct labels (add label = ...)", src)
    return pairs


def _fixed(data, src):
    fixed = {}
    for key, v in _table(data, "fixed", src).items():
        row = catalogue.FIXED.get(key)
        if row is None:
            raise unknown_name("key in [fixed]", key, catalogue.FIXED, src)
        fixed[key] = canonical(v, f"fixed.{key}", src) if row.kind == "dtype" else \
            row.check_value(v, src, f"fixed.{key}")
    return fixed


def _numeric_axes(data, fixed, pairs, src):
    """The numeric axes; acceptance given in [fixed] becomes a one-value axis (always a column)."""
    axes = {}
    for name, raw in _table(data, "axes", src).items():
        if name not in catalogue.AXES:
            raise unknown_name("axis", name, catalogue.AXES, src)
        axes[name] = _axis_values(name, raw, src)
    vector_pairs = [p for p in pairs if any(getattr(p, v) for v in VECTORS)]
    alpha_sources = [n for n in ("alpha", "accepted_length", *VECTORS) if n in axes or n in fixed]
    if vector_pairs and (alpha_sources or len(vector_pairs) != len(pairs)):
        raise SpecError(f"pair {vector_pairs[0].label!r} has its own acceptance vector: give one to every pair "
                        f"and no alpha, accepted_length or vector in [fixed] / [axes] in {src}")
    if not vector_pairs and (len(alpha_sources) != 1 or (alpha_sources[0] in axes and alpha_sources[0] in fixed)):
        raise SpecError("give exactly one of alpha, accepted_length (in [fixed] or [axes]) and acceptance_vector, "
                        f"position_rates (in [fixed] or every pair) in {src}")
    if not vector_pairs and alpha_sources[0] in ("alpha", "accepted_length") and alpha_sources[0] in fixed:
        axes[alpha_sources[0]] = (float(fixed.pop(alpha_sources[0])),)
    for key in list(fixed):
        if key in axes:
            raise SpecError(f"{key} is both in [fixed] and in [axes] in {src}")
    for key in (*LAYOUT, *TREE, "draft_kv_budget", "draft_passes"):
        if key in axes and any(getattr(p, key) for p in pairs):
            raise SpecError(f"{key} is both a pair key and an axis in {src}")
    if "expert_granularity" in axes and ("n_experts" in axes or "top_k" in axes):
        raise SpecError(f"axes.expert_granularity cannot be combined with n_experts/top_k in {src}")
    return axes


def _reduce(data, axes, fixed, src):
    """(kind, batch_max, batch_points) from [reduce], checked against the reduction's record."""
    reduce_t = _table(data, "reduce", src)
    extra = set(reduce_t) - {"kind", "batch_max", "batch_points"}
    if extra:
        raise unknown_name("key in [reduce]", sorted(extra)[0], ["kind", "batch_max", "batch_points"], src)
    kind = reduce_t.get("kind", "none")
    red = _reductions.get(kind, src)
    batch_max = reduce_t.get("batch_max", 65536.0)
    if not catalogue.INPUTS["batch"].ok(batch_max) or batch_max < 2:
        raise field_error("reduce.batch_max", batch_max, "a number in [2, 1e8]", src)
    batch_points = reduce_t.get("batch_points", 96)
    if isinstance(batch_points, bool) or not isinstance(batch_points, int) or not 8 <= batch_points <= 4096:
        raise field_error("reduce.batch_points", batch_points, "an integer in [8, 4096]", src)
    red.check_axes(axes, fixed, src)
    return kind, float(batch_max), batch_points


def _optimize(data, kind, src):
    opt = _table(data, "optimize", src)
    extra = set(opt) - {"k_max", "method"}
    if extra:
        raise unknown_name("key in [optimize]", sorted(extra)[0], ["k_max", "method"], src)
    k_method = opt.get("method", "optax")
    if k_method not in ("optax", "brute"):
        raise field_error("optimize.method", k_method, "'optax' (gradient search) or 'brute' (every integer k)", src)
    wanted = "optimize" in data or kind == "best_k"
    k_max = opt.get("k_max", 16 if wanted else 0)
    if wanted and (isinstance(k_max, bool) or not isinstance(k_max, int) or not 1 <= k_max <= 64):
        raise field_error("optimize.k_max", k_max, "an integer in [1, 64]", src)
    return int(k_max), k_method


def _sensitivity(data, kind, src):
    sens = _table(data, "sensitivity", src)
    extra = set(sens) - {"inputs"}
    if extra:
        raise unknown_name("key in [sensitivity]", sorted(extra)[0], ["inputs"], src)
    if "sensitivity" not in data:
        return ()
    red = _reductions.get(kind, src)
    if not red.sensitivity:
        takes = " or ".join(repr(r.name) for r in _reductions.REGISTRY.values() if r.sensitivity)
        raise SpecError(f"[sensitivity] needs reduce.kind = {takes} (elasticities of B_off or of the switch-off "
                        f"rate) in {src}")
    allowed = list(catalogue.SENSITIVITY)
    if red.serving:  # the load's lengths set the context
        from ..search.serving import LOAD_SENSITIVITY

        allowed = [n for n in allowed if n != "context"] + list(LOAD_SENSITIVITY)
    names = sens.get("inputs", allowed)
    if not isinstance(names, list) or not names:
        raise field_error("sensitivity.inputs", names, "a non-empty list of input names", src)
    for n in names:
        if n not in allowed:
            raise unknown_name("sensitivity input", n, allowed, src)
    return tuple(names)


def from_text(text, source="<spec>"):
    """Parse and validate a sweep spec; raises `SpecError` naming the file and field."""
    src = str(source)
    data = parse_toml(text, src)
    extra = set(data) - TOP_KEYS
    if extra:
        raise unknown_name("top-level key", sorted(extra)[0], TOP_KEYS, src)
    hardware, pairs, fixed = _hardware(data, src), _pairs(data, src), _fixed(data, src)
    axes = _numeric_axes(data, fixed, pairs, src)
    kind, batch_max, batch_points = _reduce(data, axes, fixed, src)
    k_max, k_method = _optimize(data, kind, src)
    sens_inputs = _sensitivity(data, kind, src)
    chunk = data.get("chunk_size", 65536)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= 1 << 24:
        raise field_error("chunk_size", chunk, "an integer in [1, 16777216]", src)
    hold = data.get("experts_hold", "expert_size")
    if hold not in catalogue.EXPERT_HOLD:
        raise field_error("experts_hold", hold, f"one of {', '.join(catalogue.EXPERT_HOLD)}", src)
    spec = SweepSpec(
        name=str(data.get("name", pathlib.Path(src).stem)), source=src, text=text, hardware=hardware,
        pairs=pairs, fixed=fixed, axes=axes, roofline=data.get("roofline", "operator"),
        engine=_engine(data.get("engine", engines.DEFAULT), "engine", src),
        compute_dtype=data.get("compute_dtype", "bf16"), chunk_size=chunk, experts_hold=hold, reduce=kind,
        batch_max=batch_max, batch_points=batch_points, sensitivity=sens_inputs, k_max=k_max,
        k_method=k_method, description=str(data.get("description", "")))
    if spec.rows_per_combo > 1 << 40:
        raise field_error("axes", f"{spec.rows_per_combo} rows", "at most 2^40 rows per combination", src)
    for h, p in spec.combos:  # loads every preset and checks every scalar once, before anything runs
        spec.scenario(h, p).check()
    _check_layout_axes(spec)
    return spec


def _check_layout_axes(spec):
    """Every combination of the layout axes passes the checks the CLI applies to one layout (heads and
    widths divide), except combinations whose ep or draft_tp does not divide the replica's GPUs (or ep the
    experts): those become invalid_input points (`grid.apply`), as long as each pair keeps one valid layout."""
    keys = [k for k in LAYOUT if k in spec.axes]
    if not keys:
        return
    from . import models as _models

    combos = list(itertools.product(*(sorted({int(v) for v in spec.axes[k]}) for k in keys)))
    for p in spec.pairs:
        base = spec.scenario(spec.hardware[0], p)
        experts = _models.load_architecture(p.target).n_experts
        valid, errors = [], {}
        for combo in combos:
            sc = dataclasses.replace(base, **dict(zip(keys, combo)))
            marked = not bool(layout_divides(sc.tp, sc.ep, sc.dp_attention, sc.draft_tp or 0, experts))
            try:
                sc.check()
                valid.append(combo)
            except SpecError as e:
                if not marked:
                    where = ", ".join(f"axes.{k} = {v}" for k, v in zip(keys, combo))
                    raise SpecError(f"{where} for pair {p.label!r}: {e}") from None
                errors.setdefault(combo, e)
        for i, key in enumerate(keys):  # a value no combination makes valid is a mistake, not a column of NaN
            for v in sorted({c[i] for c in combos} - {c[i] for c in valid}):
                e = next(err for c, err in errors.items() if c[i] == v)
                raise SpecError(f"axes.{key} = {v} for pair {p.label!r}: {e} (with every value of the other "
                                "layout axes)") from None


def load(path):
    """Read a sweep spec file (UTF-8 TOML) and validate it."""
    p = pathlib.Path(path)
    return from_text(read_text(p, "sweep spec", 1 << 20), str(p))
