"""What every benchmark shares: one XLA host device per core (so the CPU backend runs a sharded kernel
on every core, as `specjax sweep` does; on a GPU machine it only affects the host platform), the
repository and its tests on the path, and a best-of timer. Import it before jax."""

import os
import pathlib
import sys
import time

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={os.cpu_count()}").strip()
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]


def best_of(fn, repeats=3):
    """The shortest of `repeats` wall times of fn() (seconds)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
