"""The one dtype policy of the kernels.

A kernel computes in the floating dtype of its array inputs: float32 by default, float64 when the
inputs are float64 (under `jax_enable_x64`). Python scalars are weakly typed and adopt that dtype.
Nothing mixes float32 and float64, so the kernels pass under `jax_numpy_dtype_promotion="strict"`
(tested). Builders (`Scenario.build(dtype)`, `HardwareProfile.resolve`) choose the dtype once.
"""

import jax.numpy as jnp
import numpy as np


def float_dtype(*xs):
    """The widest floating dtype among the non-weak array inputs `xs` (float32 if there is none)."""
    found = [jnp.asarray(x).dtype for x in xs
             if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) and not getattr(x, "weak_type", False)]
    return max(found, key=lambda d: np.dtype(d).itemsize) if found else jnp.dtype(jnp.float32)
