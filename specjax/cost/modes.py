"""The roofline modes: how a pass's time is composed (`Hardware.roofline`, a static field; docs/model.md §2).

JAX-free, so the command line declares the choice without importing JAX."""

MODES = ("operator", "pass")
