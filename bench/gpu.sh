#!/usr/bin/env bash
# One prepared GPU run (under six minutes): every benchmark on the accelerator, one JSON line each at
# the end (the lines each script ends with). On the lent H200 (device tool) JAX with CUDA is installed
# but polars and filelock may not be: carry their wheels in .whl/ (see bench/README.md); this script
# installs them to /tmp/site first. The compilation cache is off here (a fresh machine each time).
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 SPECJAX_CACHE_DIR=off
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
out=$(mktemp -d)
run() {  # name, timeout, command...: its output shown, its last line kept
  local name=$1 limit=$2; shift 2
  echo "== $name"
  if timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"; then :; else echo "($name: failed or timed out)"; fi
}
run throughput 80 python3 bench/throughput.py --points 268435456 --numpy-points 4000000 --scalar-points 20000
run sweep_e2e 70 python3 bench/sweep_e2e.py
run autodiff 40 python3 bench/autodiff.py --points 4194304
run kernels 45 python3 bench/kernels.py --points 67108864 --numpy-points 2000000
run serving 50 python3 bench/serving.py --points 16777216 --curves 65536
run reductions 60 python3 bench/reductions.py --rows 262144 --points 67108864 --repeats 3
echo "== JSON (one line per benchmark)"
for name in throughput sweep_e2e autodiff kernels serving reductions; do
  line=$(tail -n 1 "$out/$name.log" 2>/dev/null || true)
  case "$line" in "{"*) echo "{\"benchmark\": \"$name\", \"result\": $line}" ;; *) echo "{\"benchmark\": \"$name\", \"result\": null}" ;; esac
done
