"""Storage sizes of weight and KV-cache number formats, in bytes per element.

mxfp4 stores 32 four-bit values with one shared 8-bit scale (4.25 bits); nvfp4 stores 16
four-bit values with one 8-bit scale (4.5 bits). Compute dtypes name the hardware peak
used for FLOP/s (`[flops_per_s]` keys of a hardware file).
"""

from .. import catalogue
from ..errors import field_error

BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
}

ALIASES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16",
           "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8"}

COMPUTE_DTYPES = catalogue.INPUTS["compute_dtype"].choices


def canonical(dtype, field="dtype", source=None):
    """Return the canonical name of a storage dtype, or raise `SpecError`."""
    name = ALIASES.get(str(dtype).lower(), str(dtype).lower())
    if name not in BYTES_PER_ELEMENT:
        raise field_error(field, dtype, f"one of {', '.join(BYTES_PER_ELEMENT)}", source)
    return name


def nbytes(dtype, field="dtype", source=None):
    """Bytes per element of a storage dtype (e.g. 2.0 for bf16, 0.53125 for mxfp4)."""
    return BYTES_PER_ELEMENT[canonical(dtype, field, source)]
