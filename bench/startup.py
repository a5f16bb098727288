"""What a user waits for: each model command (point, crossover, sensitivity, optimize, serve, advise, and
validate on a 300-row file) run cold (empty compilation cache and executable store) and warm (those of the
cold run), as separate processes, with `specjax --profile`'s breakdown (import, trace, lower, compile, the
rest), the cache hits and the store's loads, beside the import floor measured in the same run (a process
that only imports JAX and specjax's kernels); then the 100M-configuration sweep (`sweep_e2e.py`) cold and warm.

Usage: python bench/startup.py [--no-sweep] [--checkout DIR]
`--checkout`: run another checkout's specjax (its directory is each process's working directory, which
`python -m` puts first on the path), for an A/B against it with this script and the same venv.
The last line printed is one JSON object.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHECKOUT = ROOT  # the checkout whose specjax runs (`--checkout`)
MODEL = ["--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft", "eagle3-llama-3.1-8b",
         "--k", "3", "--alpha", "0.7"]
ROWS = 300  # validate: the first 300 rows of data/measured/public.csv, cycled (written to a temporary file)
COMMANDS = {
    "point": ["point", "--batch", "16", *MODEL],
    "crossover": ["crossover", *MODEL],
    "sensitivity": ["sensitivity", *MODEL],
    "optimize": ["optimize", *MODEL],
    "serve": ["serve", *MODEL, "--qps", "1", "--qps", "10"],
    "advise": ["advise", *MODEL[:-4], "--alpha", "0.7"],
    "validate": ["validate", "{rows}"],
}
FLOOR = "import jax, specjax.api; jax.devices()"  # what every model command pays before its own work
PROFILE = re.compile(r"profile: (\w+) ([\d.]+) s")
CACHE = re.compile(r"(\d+) hits, (\d+) misses")
STORE = re.compile(r"executable store .*: (\d+) loaded, (\d+) compiled")


def rows_file(directory):
    """A measurements file of `ROWS` rows: the public rows, cycled."""
    lines = (ROOT / "data" / "measured" / "public.csv").read_text().splitlines()
    body = [ln for ln in lines[1:] if ln.strip()]
    path = directory / f"rows{ROWS}.csv"
    path.write_text("\n".join([lines[0], *(body * (ROWS // len(body) + 1))[:ROWS]]) + "\n")
    return path


def environment(cache):
    """A bare environment with this run's cache."""
    return {"SPECJAX_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache.parent)}


def floor(cache):
    """Seconds a process takes to import JAX and specjax's kernels and start the backend (the best of three)."""
    env = environment(cache)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR], check=True, env=env, cwd=CHECKOUT, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def run(args, cache):
    env = environment(cache)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "specjax", "--profile", *args, "--json"], capture_output=True, text=True,
                       env=env, cwd=CHECKOUT)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {p.stderr}")
    parts = {m[1]: float(m[2]) for m in PROFILE.finditer(p.stderr)}
    hits, misses = map(int, CACHE.search(p.stderr).groups())
    loaded, compiled = map(int, STORE.search(p.stderr).groups())
    return dict(wall_s=wall, hits=hits, misses=misses, loaded=loaded, compiled=compiled,
                **{f"{k}_s": v for k, v in parts.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--checkout", type=pathlib.Path, default=ROOT)
    args = ap.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    cache = pathlib.Path(tempfile.mkdtemp(prefix="specjax-startup-")) / "cache"
    out = {"import_floor_s": floor(cache)}
    rows = rows_file(cache.parent)
    print(f"import floor (import jax and specjax.api, start the backend): {out['import_floor_s']:.2f} s")
    print(f"{'command':<12} {'cold s':>7} {'warm s':>7} {'import':>7} {'trace':>6} {'lower':>6} {'compile':>8} "
          f"{'rest':>6}  warm cache")
    for name, cmd in COMMANDS.items():
        cmd = [str(rows) if a == "{rows}" else a for a in cmd]
        cold, warm = run(cmd, cache), run(cmd, cache)
        out[name] = dict(cold=cold, warm=warm)
        print(f"{name:<12} {cold['wall_s']:>7.2f} {warm['wall_s']:>7.2f} {warm['import_s']:>7.2f} "
              f"{warm['trace_s']:>6.2f} {warm['lower_s']:>6.2f} {warm['compile_s']:>8.2f} {warm['run_s']:>6.2f}  "
              f"{warm['hits']} hits, {warm['misses']} misses; "
              f"store {warm['loaded']} loaded, {warm['compiled']} compiled")
    if not args.no_sweep:
        sweep_cache = cache.parent / "sweep-cache"
        for phase in ("cold", "warm"):
            p = subprocess.run([sys.executable, str(ROOT / "bench" / "sweep_e2e.py"), "--cache", str(sweep_cache)],
                               capture_output=True, text=True, cwd=ROOT)
            if p.returncode:
                raise SystemExit(p.stderr)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            out[f"sweep_{phase}"] = r
            print(f"100M sweep {phase}: {r['wall_s']:.2f} s, kernel {r['kernel_share']:.0%} of the wall time, "
                  f"peak RSS {r['peak_rss_bytes'] / 2**20:,.0f} MiB")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
