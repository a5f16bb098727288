import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def strict_promotion():
    """Run a test under `jax_numpy_dtype_promotion="strict"`: no implicit float32/float64 mixing."""
    with jax.numpy_dtype_promotion("strict"):
        yield
