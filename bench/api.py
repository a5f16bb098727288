"""Points per second from Python: `api.point` one at a time (a loop that varies batch, k and alpha, each a
new validated `Scenario`), the same loop as `api.point(sc, batch=..., k=..., alpha=...)` (the values checked
against their catalogue rows, no `Scenario` constructed), the loop's `Scenario` constructions alone (what
validation costs), and `api.points` batched (one call), in one run, with the ratios.

Usage: python bench/api.py [--points 1000000] [--loop 3000] [--sync]
`--sync`: JAX's CPU client runs each call inline (`jax_cpu_enable_async_dispatch` off), not on a worker
thread; on a loaded machine the handoff to that thread is most of a one-point call.
The last line printed is one JSON object.
"""

import argparse
import dataclasses
import json
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--loop", type=int, default=3000)
    ap.add_argument("--sync", action="store_true")
    args = ap.parse_args()
    if args.sync:
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)
    from specjax import api
    from specjax.inputs.scenario import Scenario

    sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
                  alpha=0.7, batch=16)
    vary = [dict(batch=float(1 + i % 64), k=1 + i % 6, alpha=0.5 + 0.4 * (i % 7) / 7) for i in range(args.loop)]
    api.point(sc)
    best = {}
    loops = {"one": lambda v: api.point(dataclasses.replace(sc, **v)),  # a new validated Scenario each
             "values": lambda v: api.point(sc, **v),  # the values checked against their rows, no Scenario built
             "build": lambda v: dataclasses.replace(sc, **v)}  # the constructions alone
    for _ in range(3):  # the best of three passes of each loop, interleaved (a shared machine's noise)
        for name, body in loops.items():
            if name != "values" or _takes_values(api.point):
                t = time.perf_counter()
                for v in vary:
                    body(v)
                best[name] = max(best.get(name, 0.0), args.loop / (time.perf_counter() - t))
    one, scenarios, values = best["one"], best["build"], best.get("values")
    n = args.points
    cols = dict(batch=np.tile(np.arange(1.0, 101.0), n // 100 + 1)[:n], k=np.tile(np.arange(1, 7), n // 6 + 1)[:n],
                alpha=np.linspace(0.5, 0.9, n))
    api.points(sc, **cols)  # compile once
    t = time.perf_counter()
    api.points(sc, **cols)
    batched = n / (time.perf_counter() - t)
    with_values = f"; api.point(sc, batch=, k=, alpha=): {values:,.0f} points/s" if values else ""
    print(f"api.point one at a time: {one:,.0f} points/s (the Scenario constructions alone: {scenarios:,.0f}/s, "
          f"{one / scenarios:.0%} of the loop){with_values}; api.points batched ({n:,}): {batched:,.0f} points/s "
          f"({batched / one:.0f}x){' [sync dispatch]' if args.sync else ''}")
    print(json.dumps(dict(one_at_a_time_per_s=one, scenarios_per_s=scenarios, values_per_s=values, batched_per_s=batched,
                          batched_points=n, sync_dispatch=args.sync)))


def _takes_values(f):
    """True where `api.point` takes batch, k and alpha as keywords (an older checkout does not: A/B runs)."""
    import inspect

    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(f).parameters.values())


if __name__ == "__main__":
    main()
