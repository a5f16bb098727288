"""Points per second from Python: `api.point` one at a time (a loop that varies batch, k and alpha, each a
new validated `Scenario`), the same loop as `api.point(sc, batch=..., k=..., alpha=...)` (the values checked
against their catalogue rows, no `Scenario` constructed), each with the step program on specjax's inline
CPU client (`specjax.inline`, the default) and on JAX's default client (JAX's asynchronous CPU dispatch: the
path before the inline client), the loop's `Scenario` constructions alone (what validation costs), and
`api.points` batched (one call), in one run, with the ratios. Each loop's rate is the best of three
interleaved passes (a shared machine's noise), beside its CPU time per point (`time.process_time`, all
threads of the process, over the same pass).

Usage: python bench/api.py [--points 1000000] [--loop 3000] [--sync]
`--sync`: JAX's own CPU client runs each call inline too (`jax_cpu_enable_async_dispatch` off, a
process-wide setting the user would make): then the "default client" loops run inline as well.
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

    inline = None
    if getattr(api._step, "inline", False):  # an older checkout (A/B runs) has only JAX's default client
        from specjax import inline
    sc = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
                  alpha=0.7, batch=16)
    vary = [dict(batch=float(1 + i % 64), k=1 + i % 6, alpha=0.5 + 0.4 * (i % 7) / 7) for i in range(args.loop)]
    clients = ("inline", "default") if inline is not None and inline.client() is not None else ("default",)
    loops = {}
    for client in clients:
        loops[("one", client)] = lambda v: api.point(dataclasses.replace(sc, **v))  # a new validated Scenario each
        if _takes_values(api.point):  # the values checked against their rows, no Scenario built
            loops[("values", client)] = lambda v: api.point(sc, **v)
    loops[("build", "-")] = lambda v: dataclasses.replace(sc, **v)  # the constructions alone
    for client in clients:  # compile (or load) each client's program once, outside the clock
        _use(inline, client)
        api.point(sc)
    best, cpu = {}, {}
    for _ in range(3):  # the best of three passes of each loop, interleaved
        for (name, client), body in loops.items():
            _use(inline, client)
            t, c = time.perf_counter(), time.process_time()
            for v in vary:
                body(v)
            rate, us = args.loop / (time.perf_counter() - t), (time.process_time() - c) / args.loop * 1e6
            if rate > best.get((name, client), 0.0):
                best[(name, client)], cpu[(name, client)] = rate, us
    _use(inline, "inline")
    n = args.points
    cols = dict(batch=np.tile(np.arange(1.0, 101.0), n // 100 + 1)[:n], k=np.tile(np.arange(1, 7), n // 6 + 1)[:n],
                alpha=np.linspace(0.5, 0.9, n))
    api.points(sc, **cols)  # compile once
    t = time.perf_counter()
    api.points(sc, **cols)
    batched = n / (time.perf_counter() - t)
    scenarios = best[("build", "-")]
    label = {"inline": "inline client", "default": "JAX's default client" + (" [sync dispatch]" if args.sync else "")}
    for (name, client), rate in best.items():
        if name == "build":
            continue
        what = "api.point(dataclasses.replace(sc, ...))" if name == "one" else "api.point(sc, batch=, k=, alpha=)"
        ratio = f", {rate / best[(name, 'default')]:.2f}x the default client" if client == "inline" else ""
        print(f"{what:42s} {label[client]:40s} {rate:9,.0f} points/s  {cpu[(name, client)]:6.1f} us CPU/point{ratio}")
    print(f"the Scenario constructions alone: {scenarios:,.0f}/s ({cpu[('build', '-')]:.1f} us CPU each); "
          f"api.points batched ({n:,}): {batched:,.0f} points/s")
    get = lambda name, client: best.get((name, client))  # noqa: E731
    print(json.dumps(dict(one_at_a_time_per_s=get("one", clients[0]), values_per_s=get("values", clients[0]),
                          one_default_client_per_s=get("one", "default"),
                          values_default_client_per_s=get("values", "default"),
                          cpu_us_per_point={f"{n}_{c}": round(u, 2) for (n, c), u in cpu.items()},
                          scenarios_per_s=scenarios, batched_per_s=batched, batched_points=n,
                          inline_client=clients[0] == "inline", sync_dispatch=args.sync)))


def _use(inline, client):
    """Send the step program to the inline client or to JAX's default one (each kept compiled in memory)."""
    if inline is not None:
        inline.enable(client == "inline")


def _takes_values(f):
    """True where `api.point` takes batch, k and alpha as keywords (an older checkout does not: A/B runs)."""
    import inspect

    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(f).parameters.values())


if __name__ == "__main__":
    main()
