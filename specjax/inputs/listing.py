"""What `specjax presets` lists, without importing JAX: per model preset its parameter counts (the leaves
a build gives, counted by `cost.params` in float32 as the pytree counts them) and shape, per hardware
preset its peak FLOP/s per compute dtype and HBM, read from the files and range-checked by the catalogue
as `hardware.load` checks them (tests/test_cli.py pins both to the pytrees')."""

import pathlib

from .. import catalogue
from . import models
from .presets import read_toml

HARDWARE_DIR = pathlib.Path(__file__).parents[1] / "presets" / "hardware"  # `hardware.PRESET_DIR` is this


def model_rows():
    """One dict per model preset: slug, parameter counts in billions, layers, experts, top-k, dtypes, kind."""
    rows = []
    for slug in models.preset_slugs():
        a = models.load_architecture(slug)
        total, active = models.preset_params(a)
        rows.append(dict(slug=slug, total_params_b=round(total / 1e9, 3), active_params_b=round(active / 1e9, 3),
                         layers=a.n_layers, experts=a.n_experts, top_k=a.top_k, weight_dtype=a.weight_dtype,
                         expert_dtype=a.expert_dtype,
                         kind="eagle-head" if a.eagle_version else ("moe" if a.n_moe_layers else "dense")))
    return rows


def hardware_slugs():
    """Slugs of the packaged hardware presets (`hardware.preset_slugs`)."""
    return sorted(p.stem for p in HARDWARE_DIR.glob("*.toml"))


def hardware_rows():
    """One dict per hardware preset: slug, name, bf16 TFLOP/s, HBM TB/s and GB, the compute dtypes with a peak."""
    slugs = hardware_slugs()
    rows = []
    for slug in slugs:
        data, _, src = read_toml(slug, "hardware", HARDWARE_DIR, slugs)
        flops = {dt: catalogue.check("flops_per_s", v, src, f"flops_per_s.{dt}")
                 for dt, v in data["flops_per_s"].items()}
        rows.append(dict(slug=slug, name=data["name"], bf16_tflops=flops.get("bf16", 0) / 1e12,
                         hbm_tb_s=catalogue.check("hbm_bytes_per_s", data["hbm_bytes_per_s"], src) / 1e12,
                         hbm_gb=catalogue.check("hbm_bytes", data["hbm_bytes"], src) / 1e9, dtypes=",".join(flops)))
    return rows
