"""specjax: does speculative decoding pay, for this target, drafter, hardware, batch and context?

A roofline cost model of speculative decoding written as pure, vmappable JAX functions.
"""

import time as _time

IMPORT_STARTED = _time.perf_counter()  # `specjax --profile` reports the import time from here
__version__ = "0.1.0"

from .cost.acceptance import alpha_from_tokens as alpha_from_tokens
from .cost.acceptance import tokens_per_step as tokens_per_step
from .errors import SpecError as SpecError
from .cost.roofline import expected_experts as expected_experts
from .cost.roofline import pass_cost as pass_cost
from .inputs.scenario import Scenario as Scenario
from .search import crossover as crossover
from .cost.speculative import Result as Result
from .cost.speculative import step as step
from .cost.trees import Decode as Decode
from .cost.trees import Deployment as Deployment
from .cost.trees import Hardware as Hardware
from .cost.trees import Model as Model
