"""Accelerators: the `Hardware` pytree the kernels read, and the TOML files that describe them.

A hardware file (presets in `specjax/presets/hardware/*.toml`, or a user's own) has keys
`name`, `hbm_bytes_per_s`, `hbm_bytes`, `link_bytes_per_s` (one direction, per GPU),
`link_latency_s`, a table `[flops_per_s]` keyed by compute dtype, and optionally `gpus_per_node` and
the inter-node link. It describes the silicon only: the engine terms (`catalogue.ENGINE`: achieved
efficiencies, overheads, per-token traffic) belong to an engine file and are refused here, so every
entry point (CLI, sweeps, the Python API) applies them one way, from the engine profile
(`engines.EngineProfile.apply`). `HardwareProfile.resolve(dtype)` picks the peak.
"""

import dataclasses
import functools
import pathlib

import jax.numpy as jnp
import numpy as np

from .. import catalogue
from .dtypes import COMPUTE_DTYPES
from ..errors import SpecError, field_error, path_exists, unknown_name
from . import listing
from .presets import read_toml
from ..cost.trees import Hardware

__all__ = ["Hardware", "HardwareProfile", "load", "preset_slugs", "profile_from_dict", "RATES"]

PRESET_DIR = listing.HARDWARE_DIR  # declared where `specjax presets` reads it without JAX
DEFAULT_LINK_LATENCY_S = 5e-6  # per all-reduce when a file gives none (not in the hardware sources)


RATES = tuple(catalogue.PROFILE)  # the scalar keys of a hardware file (all but the [flops_per_s] table)
assert set(RATES) | {"flops_per_s"} == set(Hardware.field_names), "catalogue and Hardware disagree"
DEFAULTS = {f.name: f.default for f in dataclasses.fields(Hardware)
            if f.default is not dataclasses.MISSING and f.name in RATES}
DEFAULTS.setdefault("link_latency_s", DEFAULT_LINK_LATENCY_S)
REQUIRED = tuple(k for k in RATES if k not in DEFAULTS)


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    """A hardware file as read: labels, the peak FLOP/s per compute dtype, and `rates`, the other
    `Hardware` fields by name (readable as attributes: `profile.hbm_bytes_per_s`)."""

    name: str
    slug: str
    flops_per_s: dict
    rates: dict
    source: str = ""
    calibrated_for: str = ""

    def __getattr__(self, key):
        rates = self.__dict__.get("rates", {})
        if key in rates:
            return rates[key]
        raise AttributeError(key)

    def with_rates(self, **kw):
        """A copy with some rates replaced (e.g. calibrated efficiencies)."""
        unknown = set(kw) - set(RATES) - {"calibrated_for", "name", "source"}
        if unknown:
            raise KeyError(f"not a hardware rate: {sorted(unknown)}")
        labels = {k: kw.pop(k) for k in ("calibrated_for", "name", "source") if k in kw}
        return dataclasses.replace(self, rates={**self.rates, **kw}, **labels)

    def resolve(self, compute_dtype="bf16", dtype=jnp.float32, roofline="operator"):
        """Return the kernel pytree for `compute_dtype`, or raise `SpecError` if no peak is known."""
        if compute_dtype not in self.flops_per_s:
            raise field_error("compute_dtype", compute_dtype,
                              f"a dtype with a peak on {self.slug}: {', '.join(self.flops_per_s)}")
        vals = dict(self.rates, flops_per_s=self.flops_per_s[compute_dtype])
        return Hardware(**{k: np.asarray(v, dtype) for k, v in vals.items()}, roofline=roofline)  # host: no dispatch


_KNOWN = {"name", "source", "calibrated_for", "calibration", "flops_per_s", *RATES}


def profile_from_dict(data, slug, source):
    """Validate a parsed hardware file and return a `HardwareProfile`."""
    unknown = set(data) - _KNOWN
    if unknown:
        raise unknown_name("hardware key", sorted(unknown)[0], _KNOWN, source)
    engine_terms = [k for k in catalogue.ENGINE if k in data]
    if engine_terms:  # one place applies engine terms (the engine profile); a second would disagree with it
        raise SpecError(f"{engine_terms[0]} is an engine term, not a hardware key, in {source}; put it in an "
                        "engine file (a TOML of engine terms given as --engine FILE or engine = \"FILE\"; README "
                        "\"Engine profiles\")")
    for key in ("name", "flops_per_s", *REQUIRED):
        if key not in data:
            raise SpecError(f"missing required key {key!r} in {source}")
    if not isinstance(data["name"], str):
        raise field_error("name", data["name"], "a string", source)
    flops = data["flops_per_s"]
    if not isinstance(flops, dict) or not flops:
        raise field_error("flops_per_s", flops, "a table such as [flops_per_s] bf16 = 989e12", source)
    peaks = {}
    for dt in flops:
        if dt not in COMPUTE_DTYPES:
            raise unknown_name("compute dtype in [flops_per_s]", dt, COMPUTE_DTYPES, source)
        peaks[dt] = catalogue.check("flops_per_s", flops[dt], source, f"flops_per_s.{dt}")
    vals = {k: catalogue.check(k, data[k], source) if k in data else DEFAULTS[k] for k in RATES}
    for key in ("source", "calibrated_for"):
        if not isinstance(data.get(key, ""), str):
            raise field_error(key, data[key], "a string", source)
    return HardwareProfile(name=data["name"], slug=slug, flops_per_s=peaks, rates=vals, source=data.get("source", ""),
                           calibrated_for=data.get("calibrated_for", ""))


@functools.cache
def preset_slugs():
    """Slugs of the packaged hardware presets (`listing.hardware_slugs`)."""
    return listing.hardware_slugs()


def load(name_or_path):
    """Load a hardware preset by slug (read once per process), or a user's hardware TOML by path (every time)."""
    s = str(name_or_path)
    if s in preset_slugs() and not path_exists(pathlib.Path(s)):
        return _preset(s)
    return _load(s)


@functools.lru_cache(maxsize=None)
def _preset(slug):
    return _load(slug)


def _load(name_or_path):
    data, slug, path = read_toml(name_or_path, "hardware", PRESET_DIR, preset_slugs())
    return profile_from_dict(data, slug, path)
