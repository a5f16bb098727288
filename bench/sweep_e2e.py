"""End-to-end sweep: sweeps/big.toml (about 100M configurations, crossover reduction on the
device), run in this process with its output written, then read back and checked.

Reports wall time, points/s, rows/s, peak RSS (target: under 2 GB whatever the sweep size) and
the ratio of the sweep's end-to-end rate to the bare kernel's rate on one chunk (how much the
chunking, transfers and Parquet writing cost). Last line: one JSON object with keys
points, wall_s, points_per_s, peak_rss_bytes.

With `--cache DIR` JAX's persistent compilation cache is on (as in `specjax sweep`); run twice with the
same DIR for the cold and the warm wall time (`bench/startup.py` does). `kernel_share` is the bare
kernel's time for the sweep's rows over the wall time.

Usage: python bench/sweep_e2e.py [--spec sweeps/big.toml] [--out DIR] [--cache DIR]
"""

import argparse
import json
import pathlib
import resource
import shutil
import tempfile
import time

from common import ROOT, best_of  # noqa: E402,F401  (first: sets XLA_FLAGS before jax)


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import polars as pl  # noqa: E402

from specjax.engine import plan, sweep, sweep_kernel  # noqa: E402
from specjax.inputs import spec  # noqa: E402
from specjax.outputs import io  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=str(ROOT / "sweeps" / "big.toml"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=None, help="compilation cache directory (default: off)")
    args = ap.parse_args()
    if args.cache:
        from specjax import runtime

        runtime.enable_cache(args.cache)
    s = spec.load(args.spec)
    out = pathlib.Path(args.out) if args.out else pathlib.Path(tempfile.mkdtemp(prefix="specjax-e2e-"))
    t0 = time.perf_counter()
    res = sweep.run(s, out, overwrite=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    # bare kernel on one chunk (compiled already), for the overhead ratio
    p = plan.plan(s)
    inputs = sweep.inputs(s, 0)
    kern = sweep_kernel.chunk_kernel(p.chunk, p.n_devices, sweep_kernel.config(s))
    idx = sweep._index_dtype()
    run = lambda: jax.block_until_ready(kern(jnp.asarray(0, idx), jnp.asarray(p.rows_per_combo, idx),  # noqa: E731
                                             *inputs))
    run()
    t1 = time.perf_counter()
    for _ in range(3):
        run()
    kernel_rows_per_s = 3 * p.chunk / (time.perf_counter() - t1)

    df = io.read_results(out).select("status", "crossover_batch", "beyond_memory").collect()
    assert df.height == s.rows, (df.height, s.rows)
    counts = dict(df.group_by("status").len().iter_rows())
    files = list(out.glob("hardware=*/pair=*/part-*.parquet"))
    size = sum(f.stat().st_size for f in files)
    print(f"{s.name}: {s.points:,} configurations ({s.rows:,} crossover rows x {s.batch_points} batch points), "
          f"{res['chunks_written']} chunks of {p.chunk:,} rows on {p.n_devices} {jax.default_backend()} device(s)")
    print(f"wall {wall:.2f} s (compile included), {s.points / wall:,.0f} points/s, {s.rows / wall:,.0f} rows/s")
    share = s.rows / kernel_rows_per_s / wall
    print(f"bare kernel {kernel_rows_per_s:,.0f} rows/s; end-to-end / kernel = {s.rows / wall / kernel_rows_per_s:.2f} "
          f"(the kernel is {share:.0%} of the wall time)")
    print(f"peak RSS {peak / 2**20:,.0f} MiB; output {len(files)} files, {size / 2**20:.1f} MiB; statuses {counts}")
    print(f"crossover batch: median {df['crossover_batch'].median():,.1f}, "
          f"share beyond memory {df['beyond_memory'].mean():.1%}")
    if not args.out:
        shutil.rmtree(out)
    print(json.dumps(dict(points=s.points, rows=s.rows, wall_s=wall, points_per_s=s.points / wall,
                          peak_rss_bytes=peak, kernel_rows_per_s=kernel_rows_per_s, kernel_share=share,
                          output_bytes=size, cache=bool(args.cache),
                          devices=p.n_devices, backend=jax.default_backend(), polars=pl.__version__)))


if __name__ == "__main__":
    main()
