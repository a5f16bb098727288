"""What a user waits for: each model command run cold (empty compilation cache) and warm (the cache from
the cold run), as separate processes, with `specjax --profile`'s breakdown (import, trace, lower,
compile, the rest) and the cache hits; then the 100M-configuration sweep (`sweep_e2e.py`) cold and warm.

Usage: python bench/startup.py [--no-sweep]
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
MODEL = ["--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft", "eagle3-llama-3.1-8b",
         "--k", "3", "--alpha", "0.7"]
COMMANDS = {
    "point": ["point", "--batch", "16", *MODEL],
    "crossover": ["crossover", *MODEL],
    "sensitivity": ["sensitivity", *MODEL],
    "optimize": ["optimize", *MODEL],
    "serve": ["serve", *MODEL, "--qps", "1", "--qps", "10"],
}
PROFILE = re.compile(r"profile: (\w+) ([\d.]+) s")
CACHE = re.compile(r"(\d+) hits, (\d+) misses")


def run(args, cache):
    env = {"SPECJAX_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache.parent)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "specjax", "--profile", *args, "--json"], capture_output=True, text=True,
                       env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {p.stderr}")
    parts = {m[1]: float(m[2]) for m in PROFILE.finditer(p.stderr)}
    hits, misses = map(int, CACHE.search(p.stderr).groups())
    return dict(wall_s=wall, hits=hits, misses=misses, **{f"{k}_s": v for k, v in parts.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args()
    cache = pathlib.Path(tempfile.mkdtemp(prefix="specjax-startup-")) / "cache"
    out = {}
    print(f"{'command':<12} {'cold s':>7} {'warm s':>7} {'import':>7} {'trace':>6} {'lower':>6} {'compile':>8} "
          f"{'rest':>6}  warm cache")
    for name, cmd in COMMANDS.items():
        cold, warm = run(cmd, cache), run(cmd, cache)
        out[name] = dict(cold=cold, warm=warm)
        print(f"{name:<12} {cold['wall_s']:>7.2f} {warm['wall_s']:>7.2f} {warm['import_s']:>7.2f} "
              f"{warm['trace_s']:>6.2f} {warm['lower_s']:>6.2f} {warm['compile_s']:>8.2f} {warm['run_s']:>6.2f}  "
              f"{warm['hits']} hits, {warm['misses']} misses")
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
