"""Frozen dataclasses registered as JAX pytrees (the jax-md recipe, no extra dependency).

Numeric fields are pytree leaves; a field declared with `static()` is metadata: part of the
tree structure, hashed by `jax.jit` as a compile-time constant (e.g. the roofline mode).
`.replace(**kw)` gives what-if copies, never mutation. `field_names` lists the leaves only.
"""

import dataclasses

import jax


def static(default):
    """A static (non-leaf) field with a default: a compile-time constant of the kernels."""
    return dataclasses.field(default=default, metadata={"static": True})


def pytree_dataclass(cls):
    """Make `cls` a frozen dataclass; its non-static fields are pytree leaves."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    leaves = [f.name for f in fields if not f.metadata.get("static")]
    meta = [f.name for f in fields if f.metadata.get("static")]
    jax.tree_util.register_dataclass(cls, data_fields=leaves, meta_fields=meta)
    if "replace" not in cls.__dict__:  # a class may define its own (e.g. to keep a static field right)
        cls.replace = lambda self, **kw: dataclasses.replace(self, **kw)
    cls.field_names = tuple(leaves)
    return cls
