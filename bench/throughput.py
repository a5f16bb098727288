"""Speedup evaluations per second: jitted JAX kernel vs a NumPy-vectorised reference vs a scalar
Python loop, on the same grid (MoE target gpt-oss-120b, draft model gpt-oss-20b, KV traffic,
operator roofline). Checks that the three agree, prints configs/s and their ratios, and the
fraction of this machine's measured matmul peak that XLA's cost analysis implies.

Usage: python bench/throughput.py [--points N] [--scalar-points N]
The last line printed is one JSON object: points, jax_per_s, numpy_per_s, python_per_s, ...
"""

import argparse
import json
import time

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402


import numpy_reference as npref  # noqa: E402
import reference as ref  # noqa: E402

from specjax.inputs import hardware, models  # noqa: E402
from specjax.cost.speculative import Decode, Deployment, step  # noqa: E402



def matmul_peak(n=2048):
    a = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    t = best_of(lambda: f(a).block_until_ready(), 5)
    return 2 * n**3 / t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=4_000_000)
    ap.add_argument("--numpy-points", type=int, default=4_000_000)
    ap.add_argument("--scalar-points", type=int, default=20_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.points
    batch = np.exp(rng.uniform(0, np.log(4096), n)).astype(np.float32)
    k = rng.integers(1, 9, n).astype(np.float32)
    alpha = rng.uniform(0.0, 0.99, n).astype(np.float32)
    ctx = np.exp(rng.uniform(np.log(128), np.log(131072), n)).astype(np.float32)

    hw = hardware.load("h200").resolve("bf16")
    tgt = models.target(models.load_architecture("gpt-oss-120b"), kv_dtype="fp8")
    draft = models.target(models.load_architecture("gpt-oss-20b"), kv_dtype="fp8")
    one_gpu = Deployment.single()

    devices = jax.local_devices()
    n -= n % len(devices)
    batch, k, alpha, ctx = (x[:n] for x in (batch, k, alpha, ctx))
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    kernel = jax.jit(jax.vmap(lambda b, kk, a, c: step(hw, one_gpu, tgt, draft, Decode(b, kk, a, c)).speedup),
                     out_shardings=sharding)
    args_dev = [jax.device_put(jnp.asarray(x), sharding) for x in (batch, k, alpha, ctx)]
    s_jax = np.asarray(kernel(*args_dev))  # compile + first run
    t_jax = best_of(lambda: kernel(*args_dev).block_until_ready(), 5)

    hw_f, tgt_f, dr_f = ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(draft)
    n_np = min(n, args.numpy_points)
    b64, k64, a64, c64 = (x[:n_np].astype(np.float64) for x in (batch, k, alpha, ctx))
    s_np = npref.speedup(hw_f, tgt_f, dr_f, b64, k64, a64, c64)
    t_np = best_of(lambda: npref.speedup(hw_f, tgt_f, dr_f, b64, k64, a64, c64), 2)

    m = args.scalar_points
    t0 = time.perf_counter()
    s_py = np.array([ref.speedup(hw_f, tgt_f, dr_f, float(b64[i]), float(k64[i]), float(a64[i]), float(c64[i]))
                     for i in range(m)])
    t_py = time.perf_counter() - t0

    err_np = float(np.max(np.abs(s_jax[:n_np] - s_np) / s_np))
    err_py = float(np.max(np.abs(s_np[:m] - s_py) / s_py))
    assert err_np < 1e-4, f"JAX (float32) vs NumPy (float64) disagree: {err_np}"
    assert err_py < 1e-12, f"NumPy vs scalar Python disagree: {err_py}"

    # cost of the whole grid as one unsharded program (a sharded program reports one shard)
    plain = jax.jit(jax.vmap(lambda b, kk, a, c: step(hw, one_gpu, tgt, draft, Decode(b, kk, a, c)).speedup))
    cost = plain.lower(*(jnp.asarray(x) for x in (batch, k, alpha, ctx))).compile().cost_analysis()
    flops = float(cost.get("flops", 0.0)) if isinstance(cost, dict) else float(cost[0].get("flops", 0.0))
    peak = matmul_peak()
    achieved = flops / t_jax
    jax_per_s, np_per_s, py_per_s = n / t_jax, n_np / t_np, m / t_py
    print(f"grid: {n:,} configurations (gpt-oss-120b + gpt-oss-20b draft on H200, operator roofline, fp8 KV)")
    print(f"JAX kernel      {jax_per_s:14,.0f} configs/s  ({t_jax * 1e3:.1f} ms)  "
          f"[{jax.default_backend()}, {len(devices)} devices]")
    print(f"NumPy reference {np_per_s:14,.0f} configs/s  ({n_np:,} points, {t_np * 1e3:.1f} ms)")
    print(f"scalar Python   {py_per_s:14,.0f} configs/s  ({m:,} points, {t_py:.2f} s)")
    print(f"ratios: JAX/NumPy = {jax_per_s / np_per_s:.1f}x, JAX/Python = {jax_per_s / py_per_s:,.0f}x")
    print(f"agreement: max rel. diff JAX(f32) vs NumPy(f64) {err_np:.1e}; NumPy vs Python {err_py:.1e}")
    print(f"XLA cost analysis: {flops / n:.0f} FLOP/config, {achieved / 1e9:.2f} GFLOP/s achieved = "
          f"{achieved / peak:.1%} of this machine's measured f32 matmul peak ({peak / 1e9:.1f} GFLOP/s)")
    print(json.dumps(dict(points=n, jax_per_s=jax_per_s, numpy_per_s=np_per_s, python_per_s=py_per_s,
                          jax_over_numpy=jax_per_s / np_per_s, jax_over_python=jax_per_s / py_per_s,
                          max_rel_diff=err_np, flops_per_config=flops / n, fraction_of_matmul_peak=achieved / peak,
                          backend=jax.default_backend(), devices=len(devices))))


if __name__ == "__main__":
    main()
