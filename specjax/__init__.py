"""specjax: does speculative decoding pay, for this target, drafter, hardware, batch and context?

A roofline cost model of speculative decoding written as pure, vmappable JAX functions.

The names below are imported on first use (PEP 562), so `specjax --help`, `specjax presets` and an
argument error never import JAX (0.4 s of a 0.5 s start here).
"""

import importlib as _importlib
import time as _time

IMPORT_STARTED = _time.perf_counter()  # `specjax --profile` reports the import time from here
__version__ = "0.1.0"

_PUBLIC = {  # name -> the module it comes from
    "alpha_from_tokens": ".cost.acceptance", "tokens_per_step": ".cost.acceptance", "SpecError": ".errors",
    "expected_experts": ".cost.roofline", "pass_cost": ".cost.roofline", "Scenario": ".inputs.scenario",
    "crossover": ".search.crossover", "Result": ".cost.speculative", "step": ".cost.speculative",
    "Decode": ".cost.trees", "Deployment": ".cost.trees", "Hardware": ".cost.trees", "Model": ".cost.trees",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'specjax' has no attribute {name!r}")
    module = _importlib.import_module(_PUBLIC[name], __name__)
    value = module if module.__name__.endswith("." + name) else getattr(module, name)  # a module, or a name in it
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_PUBLIC])
