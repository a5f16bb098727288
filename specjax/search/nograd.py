"""Searches are not differentiable: a derivative taken through one raises `errors.NotDifferentiable`
naming what to use instead (docs/model.md §9: the implicit-function derivatives of `sensitivity`)."""

import jax

from ..errors import NotDifferentiable


def no_gradient(entry, instead):
    """An identity on a pytree of inputs that raises `NotDifferentiable` (naming `entry` and what to use
    `instead`) when a derivative is taken through it (`jax.grad`, `jax.jvp`, `jax.jacfwd`, ...; the rule
    runs while the derivative is traced, so nothing is computed). A search locates its answer with
    comparisons and loops: differentiated as code it would give 0 (or fail inside a loop) instead of the
    implicit-function derivative. Evaluation, `jit` and `vmap` are unaffected."""
    @jax.custom_jvp
    def identity(tree):
        return tree

    @identity.defjvp
    def _raise(primals, tangents):
        raise NotDifferentiable(f"{entry} is a search and has no derivative (its answer is located by "
                                f"comparisons); use {instead}")

    return identity
