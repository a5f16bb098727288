"""Engine profiles: what a serving engine adds to the silicon (docs/model.md §2.6).

An engine profile (presets in `specjax/presets/engines/*.toml`, or a user's own TOML) gives the
engine terms of the input catalogue (`catalogue.ENGINE`: achieved fractions eta_F, eta_W, the
non-overlap sigma and the overheads T_pass_fixed, t_layer, T_draft_fixed, T_step_fixed), optionally
per hardware in `[hardware.<slug>]` tables that override the top-level values. Applying a profile
replaces those fields of a hardware profile; keys it does not give keep the pure-roofline defaults.

`roofline` is the pure model: efficiencies 1, overheads 0, sigma 0, whatever the hardware file says.
A profile fitted on one GPU is applied unchanged to another: its overheads are host-side times
(scheduling, launches, sampling) that do not scale with HBM or FLOP/s, and its efficiencies are
fractions of whatever peak the hardware file gives.

A profile may carry the engine's scheduler defaults per GPU class in a `[scheduler]` table
(`inputs.scheduler`: max_num_seqs, chunk_tokens, a speculative server's cap); the serving commands use
them where the user gives no `--max-num-seqs` / `--chunk-tokens`.
"""

import dataclasses
import functools
import pathlib

from .. import catalogue
from ..cost.trees import Hardware
from ..errors import field_error, unknown_name
from . import hardware as _hw
from . import scheduler as _scheduler
from .presets import read_toml

PRESET_DIR = pathlib.Path(__file__).parents[1] / "presets" / "engines"
PURE = "roofline"
DEFAULT = catalogue.INPUTS["engine"].default  # model commands, the API, sweeps and measurement rows alike
GENERIC = "generic"  # efficiencies pooled over every engine, no overheads: for rows of engines without a profile
DEFAULTS = {f.name: f.default for f in dataclasses.fields(Hardware) if f.name in catalogue.ENGINE}
_LABELS = {"name", "description", "source", "fitted", "held", "calibration", "hardware", "scheduler"}


@dataclasses.dataclass(frozen=True)
class EngineProfile:
    """An engine as read: `values` (engine terms), `per_hardware` (slug -> overriding values),
    `scheduler` (the validated `[scheduler]` table of `inputs.scheduler`, or None)."""

    slug: str
    name: str
    values: dict
    per_hardware: dict = dataclasses.field(default_factory=dict)
    description: str = ""
    fitted: tuple = ()
    source: str = ""
    scheduler: dict | None = None

    def values_for(self, hardware_slug):
        """The engine terms on one hardware: every engine key, defaults where the profile is silent."""
        return {**DEFAULTS, **self.values, **self.per_hardware.get(hardware_slug, {})}

    def apply(self, hardware_profile):
        """A copy of a `HardwareProfile` with this engine's terms."""
        return hardware_profile.with_rates(**self.values_for(hardware_profile.slug))


def transferable(profile, slug=None, description=None):
    """The part of a profile that transfers to an engine without data of its own: its efficiencies and
    per-token terms (bytes a token moves, charged at the silicon's bandwidth), with every overhead
    (`catalogue.OVERHEADS`) 0. Overheads are the engine's software (host
    scheduling, launches, sampling, bookkeeping); the public data measure them far apart between
    engines (about 1 ms per speculative step in vLLM, little beyond its draft passes in TensorRT-LLM's
    MTP, none visible in T5X), so borrowing one engine's for another is a guess worse than leaving
    them out (README "Engine profiles")."""
    zero = {n: 0.0 for n in catalogue.OVERHEADS}
    return dataclasses.replace(profile, slug=slug or profile.slug, name=slug or profile.name,
                               values={**profile.values, **zero},
                               per_hardware={h: {**v, **{n: 0.0 for n in v if n in zero}}
                                             for h, v in profile.per_hardware.items()},
                               fitted=tuple(f for f in profile.fitted if f not in zero),
                               description=description or profile.description)


def _terms(table, source, where):
    if not isinstance(table, dict):
        raise field_error(where or "engine", table, "a table of engine terms", source)
    out = {}
    for key, v in table.items():
        if key not in catalogue.ENGINE:
            raise unknown_name(f"engine key{' in ' + where if where else ''}", key, catalogue.ENGINE, source)
        out[key] = catalogue.check(key, v, source, f"{where}.{key}" if where else key)
    return out


def from_dict(data, slug, source):
    """Validate a parsed engine file and return an `EngineProfile`."""
    unknown = set(data) - _LABELS - set(catalogue.ENGINE)
    if unknown:
        raise unknown_name("engine key", sorted(unknown)[0], sorted(_LABELS | set(catalogue.ENGINE)), source)
    for key in ("name", "description", "source"):
        if not isinstance(data.get(key, ""), str):
            raise field_error(key, data[key], "a string", source)
    fitted = data.get("fitted", [])
    if not isinstance(fitted, list) or not all(f in catalogue.ENGINE for f in fitted):
        raise field_error("fitted", fitted, f"a list of engine keys ({', '.join(catalogue.ENGINE)})", source)
    values = _terms({k: v for k, v in data.items() if k in catalogue.ENGINE}, source, "")
    per_hw = data.get("hardware", {})
    if not isinstance(per_hw, dict):
        raise field_error("hardware", per_hw, "tables [hardware.<slug>] of engine terms", source)
    known = _hw.preset_slugs()
    for h in per_hw:  # a table for a slug no hardware is loaded as would never apply: refuse, not ignore
        if h not in known:
            raise unknown_name("hardware table [hardware.<slug>] (a hardware preset's slug)", h, known, source)
    per_hw = {h: _terms(t, source, f"hardware.{h}") for h, t in per_hw.items()}
    return EngineProfile(slug=slug, name=data.get("name", slug), values=values, per_hardware=per_hw,
                         description=data.get("description", ""), fitted=tuple(fitted),
                         source=data.get("source", ""),
                         scheduler=_scheduler.from_table(data.get("scheduler"), source))


def preset_slugs():
    """Engine presets, `roofline` (the pure model) first."""
    return [PURE] + sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load(name_or_path):
    """An engine preset by slug (`roofline`, `vllm`, `sglang`, `trtllm`), or a user's engine TOML."""
    s = str(name_or_path)
    if s == PURE or s in preset_slugs():
        return _preset(s)
    return _load(s)


@functools.lru_cache(maxsize=None)
def _preset(slug):
    return _load(slug)


def _load(s):
    if s == PURE:
        return EngineProfile(slug=PURE, name="pure roofline", values=dict(DEFAULTS),
                             description="efficiencies 1, overheads 0 (the pure roofline)")
    data, slug, path = read_toml(s, "engine", PRESET_DIR, preset_slugs())
    return from_dict(data, slug, path)
