#!/usr/bin/env bash
# One prepared GPU run (under five minutes): both benchmarks on the accelerator, numbers printed.
# On the lent H200 (device tool) JAX with CUDA is installed but polars is not: carry its wheels
# in .whl/ (see bench/README.md), this script installs them to /tmp/site first.
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
echo "== throughput (2.7e8-point grid on the GPU; NumPy/Python baselines on the CPU) =="
timeout 150 python3 bench/throughput.py --points 268435456 --numpy-points 4000000 --scalar-points 20000
echo "== end-to-end 100M-configuration sweep =="
timeout 120 python3 bench/sweep_e2e.py
echo "== autodiff =="
timeout 60 python3 bench/autodiff.py --points 4194304
