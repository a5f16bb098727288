"""The sweep kernel: one jitted, vmapped function over fixed-size chunks of flat point indices.

A chunk of flat indices is generated on the device, unravelled into axis values (`grid`),
evaluated by `point` (a pure function of one point, vmapped) with the spec's reduction from the
registry (`reductions`), and returned as a dict of (chunk,) arrays. Shapes never change between
chunks or categorical combinations, so the kernel compiles once per `KernelConfig`. The flat axis is
sharded over local devices with `jax.sharding`.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .. import catalogue
from . import grid
from ..search import optimize as _optimize
from ..search import reductions as _reductions


class KernelConfig(NamedTuple):
    """The static part of a sweep kernel (hashable: one compilation per distinct value)."""

    reduce: str
    experts_hold: str
    batch_max: float
    batch_points: int
    k_max: int
    sensitivity: tuple
    k_method: str = "optax"


def config(spec):
    """The `KernelConfig` of a `SweepSpec`."""
    return KernelConfig(spec.reduce, spec.experts_hold, spec.batch_max, spec.batch_points, spec.k_max,
                        tuple(spec.sensitivity), spec.k_method)


def point(flat, values, hw, deploy, target, draft, dec, cfg):
    """Evaluate one grid point (flat index) and return a dict of scalars. Pure; vmapped by `chunk_kernel`."""
    red = _reductions.get(cfg.reduce)
    gathered = grid.gather(flat, {n: v for n, v in values.items() if n != red.consumes})
    hw, deploy, tgt, dec, invalid = grid.apply(gathered, hw, deploy, target, dec, cfg.experts_hold)
    out = {catalogue.column(n): v for n, v in gathered.items()}
    if "accepted_length" in gathered:
        out["alpha"] = dec.alpha
    results, status, valid = red.kernel(hw, deploy, tgt, draft, dec, invalid, values, cfg)
    out.update(results, valid=valid)
    if cfg.k_max and "k" not in red.searches:
        o = _optimize.best_k(hw, deploy, tgt, draft, dec, cfg.k_max, cfg.k_method)
        out.update(_reductions.masked(invalid, k_star=o.k_star, speedup_k_star=o.speedup))
    out["status_code"] = status.astype(jnp.int8)
    return out


@functools.lru_cache(maxsize=8)
def chunk_kernel(chunk, n_devices, cfg):
    """Jitted chunk kernel: (start, total, values, hw, deploy, target, draft, dec) -> dict of (chunk,) arrays."""
    devices = jax.local_devices()[:n_devices]
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))

    def run_chunk(start, total, values, hw, deploy, target, draft, dec):
        flat = start + jnp.arange(chunk, dtype=start.dtype)
        flat = jax.lax.with_sharding_constraint(jnp.minimum(flat, total - 1), sharding)
        return jax.vmap(lambda f: point(f, values, hw, deploy, target, draft, dec, cfg))(flat)

    return jax.jit(run_chunk, out_shardings=sharding)
