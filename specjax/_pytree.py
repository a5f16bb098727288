"""Frozen dataclasses registered as JAX pytrees (the jax-md recipe, no extra dependency).

Every field is a numeric leaf; labels stay outside the kernels. `.replace(**kw)` gives
what-if copies, never mutation.
"""

import dataclasses

import jax


def pytree_dataclass(cls):
    """Make `cls` a frozen dataclass whose fields are all pytree leaves."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    jax.tree_util.register_dataclass(cls, data_fields=names, meta_fields=[])
    cls.replace = lambda self, **kw: dataclasses.replace(self, **kw)
    cls.field_names = tuple(names)
    return cls
