import os
import tempfile

import jax
import pytest

jax.config.update("jax_enable_x64", True)
# One compilation cache for the whole run, never the user's: the CLI in this process and in the
# subprocess tests shares compiled kernels (a test that needs its own sets SPECJAX_CACHE_DIR itself).
os.environ.setdefault("SPECJAX_CACHE_DIR", tempfile.mkdtemp(prefix="specjax-test-cache-"))


@pytest.fixture
def strict_promotion():
    """Run a test under `jax_numpy_dtype_promotion="strict"`: no implicit float32/float64 mixing."""
    with jax.numpy_dtype_promotion("strict"):
        yield
