"""A module imported on its first attribute access.

The command line declares every option (typer reads them at import) from JAX-free modules and reaches
the kernels through `module("specjax.api")`, so `specjax --help`, `specjax presets` and an argument error
run without importing JAX (0.4 s of a 0.5 s start on a 2-core machine).
"""

import importlib


class module:  # noqa: N801  (reads like the import it stands for)
    """`module("specjax.api").point` imports `specjax.api` on first use, then is the module's attribute."""

    def __init__(self, name):
        self.__dict__["_name"] = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self.__dict__["_name"]), attr)

    def __repr__(self):
        return f"<lazy module {self.__dict__['_name']!r}>"
