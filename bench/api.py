"""Points per second from Python: `api.point` one at a time (a loop that varies batch, k and alpha, each a
new validated `Scenario`) and `api.points` batched (one call), in one run, with the ratio.

Usage: python bench/api.py [--points 1000000] [--loop 3000]
The last line printed is one JSON object.
"""

import argparse
import dataclasses
import json
import time

import numpy as np

from specjax import api
from specjax.inputs.scenario import Scenario

SC = Scenario(target="llama-3.1-8b", hardware="h100-sxm", drafter="eagle", draft="eagle3-llama-3.1-8b", k=3,
              alpha=0.7, batch=16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--loop", type=int, default=3000)
    args = ap.parse_args()
    api.point(SC)
    t = time.perf_counter()
    for i in range(args.loop):
        api.point(dataclasses.replace(SC, batch=float(1 + i % 64), k=1 + i % 6, alpha=0.5 + 0.4 * (i % 7) / 7))
    one = args.loop / (time.perf_counter() - t)
    n = args.points
    cols = dict(batch=np.tile(np.arange(1.0, 101.0), n // 100 + 1)[:n], k=np.tile(np.arange(1, 7), n // 6 + 1)[:n],
                alpha=np.linspace(0.5, 0.9, n))
    api.points(SC, **cols)  # compile once
    t = time.perf_counter()
    api.points(SC, **cols)
    batched = n / (time.perf_counter() - t)
    print(f"api.point one at a time: {one:,.0f} points/s; api.points batched ({n:,}): {batched:,.0f} points/s "
          f"({batched / one:.0f}x)")
    print(json.dumps(dict(one_at_a_time_per_s=one, batched_per_s=batched, batched_points=n)))


if __name__ == "__main__":
    main()
