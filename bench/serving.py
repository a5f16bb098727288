"""Serving fixed points per second (docs/model.md §10) against the per-batch kernel, in one run: the same
scenario (Llama-3-70B + Qwama-0.5B on 4 x H100, vllm profile, 220/200-token requests), random request
rates and acceptances. Measures

- `step`: per-batch speedup evaluations/s (the kernel every answer is built from),
- `serve`: both sides' fixed points at one rate (two bisections of lambda(B) = lambda) per second,
- `rate_curve`: the switch-off rate (48 rates plus the bisection of the crossing) per second,
- `closed`: both sides' closed loops at one concurrency (docs/model.md §11: one bisection of N(B) = N in log B
  plus the Newton step) per second, at random concurrencies 1..1024,
- `concurrency_curve`: the switch-off concurrency (48 concurrencies plus the bisection of the crossing)
  per second,

and the ratios (all measured in this run), and checks Little's law on every solve (open loop: B = lambda
N T; closed loop: N = X E2E).

Usage: python bench/serving.py [--points N] [--curves N]
The last line printed is one JSON object.
"""

import argparse
import json

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402


from specjax.cost.speculative import step  # noqa: E402
from specjax.inputs.scenario import Scenario  # noqa: E402
from specjax.search import concurrency  # noqa: E402
from specjax.search import serving  # noqa: E402

REPEATS = 7  # best of: each timed call is short (< 0.2 s on 2 cores), and this machine may be shared



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=200_000)
    ap.add_argument("--curves", type=int, default=2_000)
    args = ap.parse_args()
    sc = Scenario(target="llama-3-70b", hardware="h100-sxm", drafter="model", draft="qwama-0.5b", tp=4, draft_tp=1,
                  k=4, alpha=0.6, engine="vllm", input_len=220, output_len=200)
    hw, dep, tgt, dr, dec = sc.build()
    devices = jax.local_devices()
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    rng = np.random.default_rng(0)

    def arrays(n):
        n -= n % len(devices)
        alpha = rng.uniform(0.3, 0.9, n).astype(np.float32)
        qps = np.exp(rng.uniform(np.log(0.1), np.log(40.0), n)).astype(np.float32)
        batch = np.exp(rng.uniform(0, np.log(256), n)).astype(np.float32)
        clients = np.round(np.exp(rng.uniform(0, np.log(1024), n))).astype(np.float32)
        return n, [jax.device_put(jnp.asarray(x), sharding) for x in (alpha, qps, batch, clients)]

    n, (alpha, qps, batch, clients) = arrays(args.points)
    per_batch = jax.jit(jax.vmap(lambda a, b: step(hw, dep, tgt, dr, dec.replace(alpha=a, batch=b)).speedup),
                        out_shardings=sharding)
    solve = jax.jit(jax.vmap(lambda a, q: serving.serve(hw, dep, tgt, dr, dec.replace(alpha=a), q)),
                    out_shardings=sharding)
    per_batch(alpha, batch).block_until_ready()
    t_step = best_of(lambda: per_batch(alpha, batch).block_until_ready(), REPEATS)
    s = solve(alpha, qps)
    jax.block_until_ready(s)
    t_serve = best_of(lambda: jax.block_until_ready(solve(alpha, qps)), REPEATS)

    ok = ~np.asarray(s.base.saturated)
    lam, b, t = np.asarray(qps)[ok], np.asarray(s.base.batch)[ok], np.asarray(s.base.iteration_s)[ok]
    little = float(np.max(np.abs(b - lam * 200.0 * t) / b))  # plain side: N = L_out
    assert little < 1e-4, little

    closed = jax.jit(jax.vmap(lambda a, c: concurrency.closed(hw, dep, tgt, dr, dec.replace(alpha=a), c)),
                     out_shardings=sharding)
    c = closed(alpha, clients)
    jax.block_until_ready(c)
    t_closed = best_of(lambda: jax.block_until_ready(closed(alpha, clients)), REPEATS)
    fits = np.asarray(c.sd.fits) & np.asarray(c.base.fits)
    closed_little = max(float(np.max(np.abs(np.asarray(side.throughput_req_s)[fits] * np.asarray(side.e2e_s)[fits]
                                            / np.asarray(clients)[fits] - 1.0))) for side in (c.base, c.sd))
    assert closed_little < 1e-4, closed_little

    m, (alpha_c, _, _, _) = arrays(args.curves)
    curve = jax.jit(jax.vmap(lambda a: serving.rate_curve(hw, dep, tgt, dr, dec.replace(alpha=a)).switch_off_qps),
                    out_shardings=sharding)
    curve(alpha_c).block_until_ready()
    t_curve = best_of(lambda: curve(alpha_c).block_until_ready(), REPEATS)
    ccurve = jax.jit(jax.vmap(lambda a: concurrency.concurrency_curve(hw, dep, tgt, dr, dec.replace(alpha=a))
                              .switch_off_concurrency), out_shardings=sharding)
    ccurve(alpha_c).block_until_ready()
    t_ccurve = best_of(lambda: ccurve(alpha_c).block_until_ready(), REPEATS)

    step_s, serve_s, curve_s = n / t_step, n / t_serve, m / t_curve
    closed_s, ccurve_s = n / t_closed, m / t_ccurve
    print(f"scenario: llama-3-70b + qwama-0.5b on 4 x H100 (vllm profile), 220/200-token requests; "
          f"[{jax.default_backend()}, {len(devices)} devices]")
    print(f"per-batch step     {step_s:14,.0f} evaluations/s ({n:,} points)")
    print(f"serving fixed point{serve_s:14,.0f} solves/s      ({n:,} rates, both sides, "
          f"{serving.solve_steps(jnp.float32)} halvings each)")
    print(f"switch-off rate    {curve_s:14,.0f} curves/s      ({m:,} curves, {serving.N_GRID}-rate grid + bisection; "
          f"{1e6 / curve_s:.1f} us per curve)")
    print(f"closed loop        {closed_s:14,.0f} solves/s      ({n:,} concurrencies 1..1024, both sides, "
          f"{concurrency.solve_steps(jnp.float32)} halvings each)")
    print(f"switch-off clients {ccurve_s:14,.0f} curves/s      ({m:,} curves, {concurrency.N_GRID}-concurrency grid + "
          f"bisection; {1e6 / ccurve_s:.1f} us per curve)")
    print(f"ratios: step / open solve = {step_s / serve_s:.1f}x, step / closed solve = {step_s / closed_s:.1f}x, "
          f"open / closed solve = {serve_s / closed_s:.2f}x;")
    print(f"        open solve / rate curve = {serve_s / curve_s:.1f}x, closed solve / concurrency curve = "
          f"{closed_s / ccurve_s:.1f}x, rate curve / concurrency curve = {curve_s / ccurve_s:.2f}x")
    print(f"Little's law max rel. error: open {little:.1e}, closed {closed_little:.1e}")
    print(json.dumps(dict(points=n, curves=m, step_per_s=step_s, serve_per_s=serve_s, rate_curve_per_s=curve_s,
                          closed_per_s=closed_s, concurrency_curve_per_s=ccurve_s,
                          step_over_serve=step_s / serve_s, step_over_closed=step_s / closed_s,
                          serve_over_closed=serve_s / closed_s, serve_over_curve=serve_s / curve_s,
                          closed_over_concurrency_curve=closed_s / ccurve_s,
                          rate_curve_over_concurrency_curve=curve_s / ccurve_s,
                          littles_law_max_rel_error=little, closed_littles_law_max_rel_error=closed_little,
                          backend=jax.default_backend(), devices=len(devices))))


if __name__ == "__main__":
    main()
