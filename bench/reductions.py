"""Reductions at the kernel's speed: each sweep reduction's grid step evaluations per second as a share of
the bare step rate, measured in the same run (issue 30).

Both sides count step evaluations the same way. The bare rate is step evaluations/s of the vmapped step
kernel on the sweep's own grid (`sweeps/big.toml`'s axes plus a batch axis, each point gathered and applied
exactly as a sweep point is, one `speedup` out per point). A reduction's rate is rows x per_row / time,
per_row being the registry's count of grid configurations one row evaluates (`Reduction.per_row`: 96
batch points for `crossover`, the batch axis for `max_speedup`, k_max for `best_k`, 2 x solve steps for
`serve`); the extra evaluations a reduction makes (refinement, bisection, the speedup at the memory
limit, the optax iterations) are its own cost and are not counted. Every kernel is the sweep's chunk
kernel (`engine.sweep_kernel`), compiled once, timed best of `--repeats` on one chunk.

Shares are printed by wall time and, in brackets, by this process's CPU time (all its threads): on a
machine shared with other jobs the second moves less, and a kernel that keeps fewer cores busy than the
bare one (a loop whose trip count differs per device) shows as a lower wall share than CPU share.

The bare kernel is the `throughput.py` step kernel (random batch, k, alpha, context) on the reductions'
pair (big.toml's MoE pair on the H200); `step_grid` is the same points gathered from the grid as a sweep
point is, and `big_grid` big.toml's own grid (efficiencies per point), for `big`.

Each chunk kernel's compile time (`lower().compile()`, wall and CPU) is printed beside its rate. `--ab DIR`
also times the crossover with the curve search of another checkout (DIR/specjax/cost/_search.py's
`sign_changes`, with 28 halvings per crossing as before issue 30; everything else this checkout's), the
two interleaved `--rounds` times in this process, each round with the bare kernel again: an A/B on a
noisy machine. (PYTHONPATH does not select another checkout: `common` puts this one first.)

`--ab-all DIR` times every reduction of `--only` twice in this process, once with DIR's whole package
(imported under another name from a link in a temporary directory: its registry, kernels, spec parser and
sweep engine) and once with this checkout's, interleaved `--rounds` times with the bare kernel of each
round, and prints each side's share per round and its compile time: an A/B of the reductions themselves.

Usage: python bench/reductions.py [--rows N] [--repeats N] [--only crossover,max_speedup,...] [--ab DIR]
       [--ab-all DIR]
The last line printed is one JSON object.
"""

import argparse
import json
import pathlib
import time

from common import ROOT  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from specjax.cost.speculative import step  # noqa: E402
from specjax.engine import grid, sweep, sweep_kernel  # noqa: E402
from specjax.inputs import spec as _spec  # noqa: E402
from specjax.search import reductions  # noqa: E402

BIG = (ROOT / "sweeps" / "big.toml").read_text()
# big.toml's MoE pair on the H200, its axes less the two efficiency fractions: every point (and every row)
# varies batch, k, alpha and context over one hardware, as the bare step kernel does
HEAD = BIG[:BIG.index("[[pairs]]")].replace('hardware = ["h100-sxm", "h200"]', 'hardware = ["h200"]') + \
    BIG[BIG.rindex("[[pairs]]"):BIG.index("[axes]")]
AXES = BIG[BIG.index("[axes]"):BIG.index("hbm_efficiency")].replace("num = 68", "num = 256")  # 32,768 rows
BATCH96 = 'batch = { start = 1, stop = 65536, num = 96, scale = "log" }\n'
AT_B = AXES.replace("k = [1, 2, 3, 4, 5, 6, 7, 8]\n", 'batch = { start = 1, stop = 4096, num = 32, scale = "log" }\n')
SERVE_HEAD = (ROOT / "sweeps" / "serving.toml").read_text().split("[axes]")[0]
SERVE_AXES = ('[axes]\nalpha = { start = 0.3, stop = 0.95, num = 64 }\nk = [1, 2, 3, 4, 5, 6, 7, 8]\n')

# name: (spec text, what it is)
SPECS = {
    "crossover": (HEAD + AXES + '\n[reduce]\nkind = "crossover"\nbatch_points = 96\n',
                  "big.toml's reduction: S(B) = 1 searched over 96 batch points"),
    "max_speedup": (HEAD + AXES + BATCH96 + '\n[reduce]\nkind = "max_speedup"\n', "argmax over 96 batch points"),
    "best_k_brute": (HEAD + AT_B + '\n[reduce]\nkind = "best_k"\n[optimize]\nk_max = 16\nmethod = "brute"\n',
                     "argmax over k = 1..16 (rows also vary the batch)"),
    "best_k_optax": (HEAD + AT_B + '\n[reduce]\nkind = "best_k"\n[optimize]\nk_max = 16\n',
                     "the same by optax (3 starts x 60 steps + integer climb)"),
    "serve": (SERVE_HEAD + SERVE_AXES + 'qps = { start = 0.25, stop = 32, num = 64, scale = "log" }\n'
              '[reduce]\nkind = "serve"\n', "sweeps/serving.toml's pair: both sides' fixed points"),
    "switch_off_qps": (SERVE_HEAD + SERVE_AXES + '[reduce]\nkind = "switch_off_qps"\n',
                       "the rate curve: 48 rates, both sides' fixed points at each, and its crossings"),
    "serve_concurrency": (SERVE_HEAD + SERVE_AXES + 'concurrency = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]\n'
                          '[reduce]\nkind = "serve_concurrency"\n', "the closed loop: both sides at N clients"),
    "big": (BIG, "sweeps/big.toml itself (rows also vary the two efficiency fractions; first chip and pair)"),
}
def timed(fn, repeats):
    """(shortest wall time, shortest CPU time of this process) of `repeats` calls, in seconds. On a machine
    shared with other jobs the CPU time (all of this process's threads) moves less than the wall time."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


BARE_FOR = {"crossover": "step", "max_speedup": "step", "best_k_brute": "step", "best_k_optax": "step",
            "serve": "step_serve", "switch_off_qps": "step_serve", "serve_concurrency": "step_serve",
            "big": "big_grid"}


def search_of(checkout):
    """`sign_changes` of another checkout's `specjax/cost/_search.py` (it imports only jax), called as
    `crossover.find` calls this checkout's, with 28 halvings per crossing."""
    import importlib.util
    path = pathlib.Path(checkout) / "specjax" / "cost" / "_search.py"
    mod_spec = importlib.util.spec_from_file_location("_search_ab", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)

    def sign_changes(values, gap, x_max, n_grid, n_bisect, dtype, n_root=None, **kw):
        return mod.sign_changes(values, gap, x_max, n_grid, 28, dtype, **kw)
    return sign_changes


def ab(s, checkout, rows, repeats, rounds):
    """Interleaved rows/s of the crossover chunk kernel with this checkout's search and with `checkout`'s,
    and the bare step rate, `rounds` times: {name: [(rows/s, rows/CPU-s), ...]}, compile seconds."""
    from specjax.search import crossover
    ours = crossover.sign_changes
    kernels, compile_s = {}, {}
    n_dev = len(jax.local_devices())
    chunk = min(rows, s.rows_per_combo)
    chunk -= chunk % n_dev
    idx = sweep._index_dtype()
    args = (jnp.asarray(0, idx), jnp.asarray(s.rows_per_combo, idx), *sweep.inputs(s, 0))
    try:
        for name, fn in (("theirs", search_of(checkout)), ("ours", ours)):
            crossover.sign_changes = fn
            sweep_kernel.chunk_kernel.cache_clear()
            kern = sweep_kernel.chunk_kernel(chunk, n_dev, sweep_kernel.config(s))
            t0, c0 = time.perf_counter(), time.process_time()
            kernels[name] = kern.lower(*args).compile()
            compile_s[name] = (time.perf_counter() - t0, time.process_time() - c0)
    finally:
        crossover.sign_changes = ours
        sweep_kernel.chunk_kernel.cache_clear()
    bare_spec = _spec.from_text(HEAD + AXES + BATCH96 + '\n[reduce]\nkind = "none"\n', "step.toml")
    out = {"bare": [], "ours": [], "theirs": []}
    for _ in range(rounds):
        out["bare"].append(throughput_rate(bare_spec, 1 << 21, repeats))
        for name, k in kernels.items():
            jax.block_until_ready(k(*args))
            wall, cpu = timed(lambda: jax.block_until_ready(k(*args)), repeats)  # noqa: B023
            out[name].append((chunk / wall, chunk / cpu))
    return out, compile_s


def other_package(checkout):
    """`checkout`'s specjax package imported as `specjax_ab` (a link to it in a temporary directory): the
    modules an A/B of the reductions needs, as a namespace."""
    import importlib
    import sys
    import tempfile
    root = pathlib.Path(tempfile.mkdtemp(prefix="specjax_ab"))
    (root / "specjax_ab").symlink_to(pathlib.Path(checkout).resolve() / "specjax")
    sys.path.insert(0, str(root))
    mods = {n: importlib.import_module(f"specjax_ab.{n}") for n in ("engine.sweep", "engine.sweep_kernel",
                                                                      "inputs.spec", "search.reductions")}
    return mods["engine.sweep"], mods["engine.sweep_kernel"], mods["inputs.spec"], mods["search.reductions"]


def _compile_chunk(s, rows, sw=None, sk=None):
    """(compiled chunk kernel, its arguments, rows, compile (wall, CPU) s) of spec `s` on its first combination,
    with the sweep modules `sw`, `sk` of one checkout (default: this one's)."""
    sw, sk = sw or sweep, sk or sweep_kernel
    n_dev = len(jax.local_devices())
    chunk = min(rows, s.rows_per_combo)
    chunk -= chunk % n_dev
    kern = sk.chunk_kernel(chunk, n_dev, sk.config(s))
    idx = sw._index_dtype()
    args = (jnp.asarray(0, idx), jnp.asarray(s.rows_per_combo, idx), *sw.inputs(s, 0))
    t0, c0 = time.perf_counter(), time.process_time()
    compiled = kern.lower(*args).compile()
    return compiled, args, chunk, (time.perf_counter() - t0, time.process_time() - c0)


def compiled_chunk(pkg, text, name, rows):
    """(compiled chunk kernel, its arguments, rows, per_row, compile (wall, CPU) s) of spec `text` with the
    modules `pkg` = (sweep, sweep_kernel, spec, reductions) of one checkout."""
    sw, sk, sp, red = pkg
    s = sp.from_text(text, f"{name}.toml")
    compiled, args, chunk, compile_s = _compile_chunk(s, rows, sw, sk)
    return compiled, args, chunk, red.get(s.reduce).per_row(s), compile_s


def ab_all(checkout, wanted, rows, repeats, rounds, bare_specs):
    """Interleaved shares of each reduction in `wanted` with `checkout`'s package ("theirs") and this one's
    ("ours"): {name: {"theirs"/"ours": [(share, CPU share), ...], "compile": {side: (wall, CPU) s}}}."""
    ours_pkg = (sweep, sweep_kernel, _spec, reductions)
    theirs_pkg = other_package(checkout)
    kernels = {name: {side: compiled_chunk(pkg, SPECS[name][0], name, rows)
                      for side, pkg in (("theirs", theirs_pkg), ("ours", ours_pkg))} for name in wanted}
    out = {name: {"theirs": [], "ours": [], "compile": {side: k[4] for side, k in sides.items()}}
           for name, sides in kernels.items()}
    for _ in range(rounds):
        bare = {kind: throughput_rate(bs, 1 << 21, repeats) for kind, bs in bare_specs.items()}
        for name, sides in kernels.items():
            b = bare[BARE_FOR[name]]
            for side, (compiled, args, chunk, per_row, _) in sides.items():
                jax.block_until_ready(compiled(*args))
                wall, cpu = timed(lambda: jax.block_until_ready(compiled(*args)), repeats)  # noqa: B023
                out[name][side].append((chunk * per_row / wall / b[0], chunk * per_row / cpu / b[1]))
    return out


def chunk_rate(s, rows, repeats):
    """(rows/s, rows timed) of the sweep chunk kernel of spec `s` on its first combination."""
    compiled, args, chunk, compile_s = _compile_chunk(s, rows)
    run = lambda: jax.block_until_ready(compiled(*args))  # noqa: E731
    run()
    wall, cpu = timed(run, repeats)
    return chunk / wall, chunk / cpu, chunk, compile_s


def bare_rate(s, points, repeats):
    """Step evaluations/s of the vmapped step kernel on spec `s`'s grid (with a batch axis), each point gathered
    and applied as a sweep point is; only `speedup` comes out."""
    devices = jax.local_devices()
    n = min(points, s.points) - min(points, s.points) % len(devices)
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    values, hw, deploy, tgt, draft, dec = sweep.inputs(s, 0)
    hold = s.experts_hold

    def one(flat):
        g = grid.gather(flat, values)
        h, d, t, dc, _ = grid.apply(g, hw, deploy, tgt, dec, hold)
        return step(h, d, t, draft, dc).speedup

    idx = sweep._index_dtype()
    total = jnp.asarray(s.points, idx)

    def kernel(start):
        flat = jax.lax.with_sharding_constraint(jnp.minimum(start + jnp.arange(n, dtype=idx), total - 1), sharding)
        return jax.vmap(one)(flat)

    k = jax.jit(kernel, out_shardings=sharding)
    start = jnp.asarray(0, idx)
    run = lambda: k(start).block_until_ready()  # noqa: E731
    run()
    wall, cpu = timed(run, repeats)
    return n / wall, n / cpu


def throughput_rate(s, points, repeats):
    """The `throughput.py` kernel on spec `s`'s first combination: random (batch, k, alpha, context)."""
    devices = jax.local_devices()
    n = points - points % len(devices)
    sharding = NamedSharding(Mesh(np.array(devices), ("points",)), PartitionSpec("points"))
    _, hw, deploy, tgt, draft, dec = sweep.inputs(s, 0)
    rng = np.random.default_rng(0)
    cols = [np.exp(rng.uniform(0, np.log(4096), n)), rng.integers(1, 9, n), rng.uniform(0.0, 0.99, n),
            np.exp(rng.uniform(np.log(128), np.log(131072), n))]
    args = [jax.device_put(jnp.asarray(c, dec.alpha.dtype), sharding) for c in cols]
    k = jax.jit(jax.vmap(lambda b, kk, a, c: step(hw, deploy, tgt, draft,
                                                   dec.replace(batch=b, k=kk, alpha=a, context=c)).speedup),
                out_shardings=sharding)
    run = lambda: k(*args).block_until_ready()  # noqa: E731
    run()
    wall, cpu = timed(run, repeats)
    return n / wall, n / cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32768, help="rows per reduction chunk (the sweep's chunk_size)")
    ap.add_argument("--points", type=int, default=4_194_304, help="points of the bare kernels")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=",".join(SPECS), help="comma-separated reductions")
    ap.add_argument("--ab", default=None, help="another checkout: A/B of the crossover search against it")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of --ab")
    ap.add_argument("--ab-all", default=None, help="another checkout: A/B of every reduction of --only against it")
    args = ap.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    if args.ab_all:
        if "big" in wanted:
            raise SystemExit("--ab-all: leave out 'big' (its bare rate is a grid kernel of its own)")
        none = '\n[reduce]\nkind = "none"\n'
        bare_specs = {"step": _spec.from_text(HEAD + AXES + BATCH96 + none, "step.toml"),
                      "step_serve": _spec.from_text(SERVE_HEAD.split("[fixed]")[0] + '[fixed]\ncontext = 320\n'
                                                    'batch = 64\n' + SERVE_AXES + none, "step_serve.toml")}
        bare_specs = {k: v for k, v in bare_specs.items() if any(BARE_FOR[w] == k for w in wanted)}
        runs = ab_all(args.ab_all, wanted, args.rows, args.repeats, args.rounds, bare_specs)
        print(f"{jax.default_backend()}, {len(jax.local_devices())} device(s), jax {jax.__version__}; A/B of the "
              f"reductions against {args.ab_all} ({args.rounds} interleaved rounds; share of the bare rate of "
              "the same round by wall time [by CPU time]):")
        for name, r in runs.items():
            for side in ("theirs", "ours"):
                cw, cc = r["compile"][side]
                line = ", ".join(f"{a:.2f} [{c:.2f}]" for a, c in r[side])
                print(f"  {name:<14} {side:<6} {line}   (compiled in {cw:.1f} s [{cc:.1f} CPU-s])")
        print(json.dumps(dict(ab_all=args.ab_all, runs=runs)))
        return
    specs = {name: _spec.from_text(SPECS[name][0], f"{name}.toml") for name in wanted}
    bare = {}
    none = '\n[reduce]\nkind = "none"\n'
    if any(BARE_FOR[w] == "step" for w in wanted):
        s = _spec.from_text(HEAD + AXES + BATCH96 + none, "step.toml")
        bare["step"] = throughput_rate(s, args.points, args.repeats)
        bare["step_grid"] = bare_rate(s, args.points, args.repeats)  # the same points through grid.gather/apply
    if any(BARE_FOR[w] == "step_serve" for w in wanted):
        s = _spec.from_text(SERVE_HEAD.split("[fixed]")[0] + '[fixed]\ncontext = 320\nbatch = 64\n' + SERVE_AXES + none,
                            "step_serve.toml")
        bare["step_serve"] = throughput_rate(s, args.points, args.repeats)
    if "big" in wanted:
        s = _spec.from_text(BIG[:BIG.index("[reduce]")] + BATCH96 + none, "big_grid.toml")
        bare["big_grid"] = bare_rate(s, args.points, args.repeats)
    print(f"{jax.default_backend()}, {len(jax.local_devices())} device(s), jax {jax.__version__}; shares by wall time "
          "(by this process's CPU time in brackets)")
    for name, (r, rc) in bare.items():
        print(f"{name:<18} {r:14,.0f} step evaluations/s   [{rc:14,.0f} per CPU-second]")
    result = dict(bare={k: v[0] for k, v in bare.items()}, bare_cpu={k: v[1] for k, v in bare.items()},
                  reductions={}, backend=jax.default_backend(), devices=len(jax.local_devices()))
    for name in wanted:
        s = specs[name]
        per_row = reductions.get(s.reduce).per_row(s)
        rows_per_s, rows_per_cpu_s, rows, (compile_wall, compile_cpu) = chunk_rate(s, args.rows, args.repeats)
        evals = rows_per_s * per_row
        share, cpu_share = evals / bare[BARE_FOR[name]][0], rows_per_cpu_s * per_row / bare[BARE_FOR[name]][1]
        print(f"{name:<18} {rows_per_s:12,.0f} rows/s x {per_row:4d} = {evals:14,.0f} evaluations/s = "
              f"{share:5.2f} [{cpu_share:5.2f}] of bare   ({rows:,} rows; {SPECS[name][1]}; compiled in "
              f"{compile_wall:.1f} s [{compile_cpu:.1f} CPU-s])")
        result["reductions"][name] = dict(rows_per_s=rows_per_s, per_row=per_row, evaluations_per_s=evals,
                                          share_of_bare=share, cpu_share_of_bare=cpu_share, compile_s=compile_wall,
                                          compile_cpu_s=compile_cpu)
    if args.ab:
        s = _spec.from_text(SPECS["crossover"][0], "crossover.toml")
        per_row = reductions.get(s.reduce).per_row(s)
        runs, compile_s = ab(s, args.ab, args.rows, args.repeats, args.rounds)
        print(f"A/B of the crossover search against {args.ab} (interleaved, {args.rounds} rounds; share of the "
              "bare rate measured in the same round):")
        for name in ("theirs", "ours"):
            line = ", ".join(f"{r:,.0f} rows/s {r * per_row / b[0]:.2f} [{rc * per_row / b[1]:.2f}]"
                             for (r, rc), b in zip(runs[name], runs["bare"]))
            print(f"  {name:<6} compiled in {compile_s[name][0]:.1f} s [{compile_s[name][1]:.1f} CPU-s]; {line}")
        result["ab"] = dict(checkout=args.ab, bare=runs["bare"], ours=runs["ours"], theirs=runs["theirs"],
                            compile_s=compile_s)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
