"""Every variant of the step kernel, against the pure full-model kernel and the NumPy reference, in one
run: engine overheads (the vllm profile), an acceptance vector, a draft tree, expert parallelism with
DP attention. Each is a jitted, sharded vmap over random batches, draft lengths, acceptances and
contexts; each is checked against `numpy_reference.py` (float64) and timed against it.

Usage: python bench/kernels.py [--points N] [--numpy-points N]
The last line printed is one JSON object: per variant jax_per_s, numpy_per_s, jax_over_numpy,
over_pure (its JAX rate / the pure kernel's) and max_rel_diff.
"""

import argparse
import json

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402


import numpy_reference as npref  # noqa: E402
import reference as ref  # noqa: E402

from specjax.cost.speculative import step  # noqa: E402
from specjax.inputs.scenario import Scenario  # noqa: E402

RATES = (0.8, 0.6, 0.5, 0.4)
GPT = dict(target="gpt-oss-120b", hardware="h200", drafter="model", draft="gpt-oss-20b", kv_dtype="fp8", alpha=0.7)
VARIANTS = {  # name -> (Scenario keywords, numpy keywords, fixed k or None)
    "pure": (dict(GPT, engine="roofline"), {}, None),
    "engine overheads": (dict(GPT, engine="vllm"), {}, None),
    "acceptance vector": (dict({**GPT, "alpha": None}, engine="roofline", acceptance_vector=RATES),
                          dict(rates=np.asarray(RATES)), None),
    "draft tree": (dict(GPT, engine="roofline", k=3, tree_topk=4, tree_tokens=21), dict(tree=(4, 21)), 3),
    "EP + DP attention": (dict(target="deepseek-v3", hardware="h200", drafter="mtp", kv_dtype="fp8", alpha=0.7,
                               engine="roofline", tp=1, dp_attention=8, ep=8),
                          dict(lay=dict(tp=1.0, ep=8.0, dp=8.0)), None),
}



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--numpy-points", type=int, default=1_000_000)
    args = ap.parse_args()
    devices = jax.local_devices()
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    rng = np.random.default_rng(0)
    n = args.points - args.points % len(devices)
    grid = dict(batch=np.exp(rng.uniform(0, np.log(1024), n)), k=rng.integers(1, 9, n).astype(float),
                alpha=rng.uniform(0.0, 0.99, n), context=np.exp(rng.uniform(np.log(128), np.log(32768), n)))
    out = {}
    for name, (kw, np_kw, fixed_k) in VARIANTS.items():
        sc = Scenario(engine="roofline", **{k_: v for k_, v in kw.items() if v is not None})
        hw, dep, tgt, dr, dec = sc.build()
        g = dict(grid, k=np.full(n, float(fixed_k)) if fixed_k else grid["k"])
        kernel = jax.jit(jax.vmap(lambda b, kk, a, c: step(hw, dep, tgt, dr, dec.replace(
            batch=b, k=kk, alpha=a, context=c)).speedup), out_shardings=sharding)
        xs = [jax.device_put(jnp.asarray(g[c], jnp.float32), sharding) for c in ("batch", "k", "alpha", "context")]
        s_jax = np.asarray(kernel(*xs))
        t_jax = best_of(lambda: kernel(*xs).block_until_ready())
        h, t, d = ref.as_floats(hw), ref.as_floats(tgt), ref.as_floats(dr)
        m = min(n, args.numpy_points)
        cols = [np.asarray(xs_i, np.float64)[:m] for xs_i in xs]
        s_np = npref.speedup(h, t, d, *cols, **np_kw)
        t_np = best_of(lambda: npref.speedup(h, t, d, *cols, **np_kw), 2)
        err = float(np.max(np.abs(s_jax[:m] - s_np) / s_np))
        assert err < 1e-4, f"{name}: JAX (float32) vs NumPy (float64) disagree by {err}"
        out[name] = dict(jax_per_s=n / t_jax, numpy_per_s=m / t_np, jax_over_numpy=(n / t_jax) / (m / t_np),
                         max_rel_diff=err)
    pure = out["pure"]["jax_per_s"]
    print(f"{n:,} configurations per variant (batch 1..1024, k 1..8, alpha, context 128..32k), float32; "
          f"[{jax.default_backend()}, {len(devices)} devices]")
    print(f"{'variant':<20} {'JAX configs/s':>15} {'NumPy configs/s':>16} {'JAX/NumPy':>10} {'vs pure':>8} "
          f"{'max rel diff':>13}")
    for name, r in out.items():
        r["over_pure"] = r["jax_per_s"] / pure
        print(f"{name:<20} {r['jax_per_s']:>15,.0f} {r['numpy_per_s']:>16,.0f} {r['jax_over_numpy']:>9.1f}x "
              f"{r['over_pure']:>7.2f}x {r['max_rel_diff']:>13.1e}")
    print(json.dumps(dict(points=n, backend=jax.default_backend(), devices=len(devices), variants=out)))


if __name__ == "__main__":
    main()
