"""The jitted kernels behind the figure frames (`outputs.curves` formats what they return).

Module-level `jax.jit` functions of the pytrees and of the values swept, so a figure compiles each
kernel once per shape and dtype and every later figure (or call) reuses it; a closure jitted inside
the caller would compile again on every call.
"""

import functools

import jax
import jax.numpy as jnp

from ..cost.roofline import operator_times
from ..cost.speculative import step
from ..search.optimize import search


@jax.jit
def speedup_over_batch(hw, deploy, target, draft, dec, batches):
    """`speculative.step` at each of `batches` (sequences, shape (n,)), other inputs as in `dec`: a
    `Result` with (n,) leaves."""
    return jax.vmap(lambda b: step(hw, deploy, target, draft, dec.replace(batch=b)))(batches)


@functools.partial(jax.jit, static_argnames=("k_max",))
def optimal_k(hw, deploy, target, draft, dec, alphas, batches, k_max=16):
    """The optax k* search at each (alpha, batch) pair (shape (n,) each): (the `search` result with (n,)
    leaves, the point status at k* (at least 1), an int8 `status.Point` code per pair)."""
    def one(a, b):
        d = dec.replace(alpha=a, batch=b)
        o = search(hw, deploy, target, draft, d, k_max)
        return o, step(hw, deploy, target, draft, d.replace(k=jnp.maximum(o.k_star, 1.0))).status

    return jax.vmap(one)(alphas, batches)


@jax.jit
def operators_over_batch(hw, deploy, model, batches, q, context):
    """`roofline.operator_times` of one pass of `q` tokens per sequence at each of `batches` (shape (n,)):
    (flops, bytes, t_math, t_mem, t), each a tuple over `OPERATORS` of (n,) arrays."""
    return jax.vmap(lambda b: operator_times(hw, deploy, model, b, q, context))(batches)
