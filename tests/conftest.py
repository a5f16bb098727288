import importlib.util
import mmap
import os
import pathlib
import tempfile


def _knows_flag(name):
    """Whether the installed jaxlib has an XLA flag by this name: XLA aborts on an unknown flag in XLA_FLAGS,
    and a flag it retires stays as a named no-op first, so the name's presence in the library is the test."""
    lib = pathlib.Path(importlib.util.find_spec("jaxlib").origin).parent / "libjax_common.so"
    try:
        with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(name.encode()) >= 0
    except (OSError, ValueError):
        return False


# The suite spends most of its time compiling (hundreds of programs, each run on a few points), not running:
# XLA at LLVM optimisation level 0 and, where this jaxlib has them, the CPU's loop emitters instead of its
# fusion emitters compile about 1.7x faster here (9.4 -> 5.1 minutes for the suite on 2 cores). Neither changes
# what is computed (no fast-math, the same HLO); `test_sweep.py::test_sharded_over_four_devices_equals_one`
# runs its subprocess at XLA's defaults and compares every output column bit for bit with this process's.
# Speed is measured by bench/, at the defaults. Set before JAX starts its backend; xdist workers inherit it.
_FLAGS = ["--xla_backend_optimization_level=0"]
if _knows_flag("xla_cpu_use_fusion_emitters"):
    _FLAGS.append("--xla_cpu_use_fusion_emitters=false")
_have = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = " ".join([_have, *(f for f in _FLAGS if f.split("=")[0] not in _have)]).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

from specjax import runtime  # noqa: E402

jax.config.update("jax_enable_x64", True)
# One compilation cache for the whole run, never the user's, shared by both xdist workers (the controller makes
# the directory before it starts them) and every subprocess: a program compiled in one is loaded by the others
# (a test that needs its own cache sets SPECJAX_CACHE_DIR itself).
os.environ.setdefault("SPECJAX_CACHE_DIR", tempfile.mkdtemp(prefix="specjax-test-cache-"))
runtime.enable_cache()


@pytest.fixture
def strict_promotion():
    """Run a test under `jax_numpy_dtype_promotion="strict"`: no implicit float32/float64 mixing."""
    with jax.numpy_dtype_promotion("strict"):
        yield
