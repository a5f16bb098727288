"""Autodiff throughput: crossover sensitivities/s and optax k*-searches/s on a grid, with the
ratio to the plain forward evaluation (one speedup) and to the crossover search they build on.

Grid: gpt-oss-120b + EAGLE-3 head on an H200, operator roofline, random (alpha, context, k,
draft cost) points. Last line: one JSON object.

Usage: python bench/autodiff.py [--points N]
"""

import argparse
import json
import time

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from specjax import crossover  # noqa: E402
from specjax.search import optimize, sensitivity  # noqa: E402
from specjax.inputs.scenario import Scenario  # noqa: E402
from specjax.cost.speculative import step  # noqa: E402


def timed(fn, *args, repeats=3):
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=65536)
    args = ap.parse_args()
    devices = jax.local_devices()
    n = args.points - args.points % len(devices)
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    sc = Scenario(engine="roofline",
                  target="gpt-oss-120b", hardware="h200", drafter="eagle", draft="eagle3-gpt-oss-120b", alpha=0.7,
                  k=3, kv_dtype="fp8")
    hw, dep, tgt, draft, dec = sc.build()
    rng = np.random.default_rng(0)
    grid = dec.replace(**{f: jnp.full(n, getattr(dec, f)) for f in dec.field_names if getattr(dec, f) is not None})
    grid = grid.replace(alpha=jnp.asarray(rng.uniform(0.4, 0.95, n), jnp.float32),
                        context=jnp.asarray(np.exp(rng.uniform(np.log(256), np.log(65536), n)), jnp.float32),
                        k=jnp.asarray(rng.integers(1, 7, n), jnp.float32),
                        batch=jnp.asarray(np.exp(rng.uniform(0, np.log(2048), n)), jnp.float32))
    grid = jax.device_put(grid, sharding)

    def vm(f):
        return jax.jit(jax.vmap(f), out_shardings=sharding)

    forward = vm(lambda d: step(hw, dep, tgt, draft, d).speedup)
    find = vm(lambda d: crossover.find(hw, dep, tgt, draft, d).crossover_batch)
    sens = vm(lambda d: sensitivity.crossover_sensitivity(hw, dep, tgt, draft, d)[2]["alpha"])
    ksearch = vm(lambda d: optimize.search(hw, dep, tgt, draft, d, 16).k_star)
    brute = vm(lambda d: optimize.brute_force(hw, dep, tgt, draft, d, 16)[0])

    t = {name: timed(f, grid) for name, f in
         [("forward", forward), ("crossover", find), ("sensitivity", sens), ("k_search", ksearch),
          ("brute_force_k", brute)]}
    rate = {k: n / v for k, v in t.items()}
    print(f"grid: {n:,} points, gpt-oss-120b + EAGLE-3 on H200, {len(devices)} {jax.default_backend()} device(s)")
    for k, v in rate.items():
        print(f"{k:<14} {v:14,.0f} /s   ({t[k] * 1e3:8.1f} ms)   forward/this = {rate['forward'] / v:8.1f}x")
    print(f"sensitivities (all {len(sensitivity.INPUTS)} inputs, incl. the crossover search): "
          f"{rate['sensitivity']:,.0f}/s = {rate['crossover'] / rate['sensitivity']:.2f}x the cost of the crossover "
          "alone")
    print(json.dumps(dict(points=n, forward_per_s=rate["forward"], crossover_per_s=rate["crossover"],
                          sensitivities_per_s=rate["sensitivity"], k_searches_per_s=rate["k_search"],
                          brute_force_k_per_s=rate["brute_force_k"],
                          sensitivity_vs_forward=rate["forward"] / rate["sensitivity"],
                          k_search_vs_forward=rate["forward"] / rate["k_search"], devices=len(devices),
                          backend=jax.default_backend())))


if __name__ == "__main__":
    main()
