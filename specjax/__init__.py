"""specjax: does speculative decoding pay, for this target, drafter, hardware, batch and context?

A roofline cost model of speculative decoding written as pure, vmappable JAX functions.
"""

__version__ = "0.1.0"

from .acceptance import alpha_from_tokens as alpha_from_tokens
from .acceptance import tokens_per_step as tokens_per_step
from .errors import SpecError as SpecError
from .roofline import expected_experts as expected_experts
from .roofline import pass_cost as pass_cost
from .scenario import Scenario as Scenario
from .speculative import Result as Result
from .speculative import step as step
from .trees import Decode as Decode
from .trees import Deployment as Deployment
from .trees import Hardware as Hardware
from .trees import Model as Model
