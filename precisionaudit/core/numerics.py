"""Numeric facts of each dtype, by name; the Target itself lives in target.py.

Kept free of torch (numpy rounds the values): ONNX scans and conversions, and the CLI's
start, must not pay for a torch import. The torch dtypes live on the torch side
(``runtime.pytorch.dtypes``).
"""
from __future__ import annotations

import numpy as np

from .target import DEVICES, DTYPES, MODES, Target  # noqa: F401  (re-exported)

#: the low-precision dtypes a target can name, as the IR names them
LOW_PRECISION_NAMES = frozenset(DTYPES)

#: largest finite float16 value (larger values round to inf)
FP16_MAX = 65504.0
#: largest finite value of each float dtype (torch.finfo(dtype).max)
LARGEST_FINITE = {"float16": FP16_MAX, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}
#: smallest positive subnormal of each float dtype: non-zero values below half of it round to 0
SMALLEST_SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149}
#: smallest positive normal value of each float dtype (torch.finfo(dtype).tiny)
SMALLEST_NORMAL = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126}
#: largest integer N such that every integer in [0, N] is exact in the dtype
EXACT_INTEGER_LIMIT = {"float16": 2048, "bfloat16": 256, "float32": 2**24}
#: unit roundoff 2^-(stored significand bits + 1): the largest relative change storing a value makes
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}

#: the FP8 formats of an FP8 GEMM's operands, kept apart from the tables above: they are no
#: "low-precision float" of the fp16/bf16 rules (an FP8 tensor is always scaled, never
#: autocast's storage dtype). Values are torch.finfo(torch.float8_e4m3fn) and
#: torch.finfo(torch.float8_e5m2): max, tiny (smallest normal), smallest_normal * eps
#: (smallest subnormal); E4M3 carries 3 stored mantissa bits, E5M2 two.
FP8_FORMATS = {
    "float8_e4m3fn": {"max": 448.0, "smallest_normal": 2.0**-6, "smallest_subnormal": 2.0**-9,
                      "unit_roundoff": 2.0**-4},
    "float8_e5m2": {"max": 57344.0, "smallest_normal": 2.0**-14, "smallest_subnormal": 2.0**-16,
                    "unit_roundoff": 2.0**-3},
}


def dtype_name(dtype) -> str | None:
    """'float16' for torch.float16 (or numpy's float16); None stays None."""
    return None if dtype is None else str(dtype).replace("torch.", "")


def rounds_to(value: float, dtype: str) -> float:
    """What a Python float becomes when stored in the float dtype named ``dtype`` (inf on
    overflow, 0 on underflow), as torch stores it: through float32, rounding to nearest even."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _rounded(np.float32(value), dtype, value)


def _rounded(single, dtype: str, value: float) -> float:
    if dtype == "float16":
        return float(single.astype(np.float16))
    if dtype == "bfloat16":
        if np.isnan(single):
            return float(single)
        bits = int(single.view(np.uint32))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round half to even
        return float(np.uint32(bits).view(np.float32))
    if dtype == "float32":
        return float(single)
    return float(value)


#: the FP4 element format E2M1 (OCP Microscaling spec v1.0, section 5.3.3: 1 sign, 2 exponent,
#: 1 mantissa bit, bias 1, no inf or NaN): its non-negative values, in order. 0.5 is its only
#: subnormal; 6 its largest value.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
#: each block-scaled FP4 format: elements per scale block, the scale's format, and the
#: per-tensor scale where there is one. NVFP4: Transformer Engine's NVFP4BlockScaling
#: (16 values per E4M3 scale, an FP32 scale per tensor; weights in 16x16 tiles); MXFP4: OCP MX
#: (32 values per E8M0 scale, a power of 2).
FP4_FORMATS = {
    "nvfp4": {"block": 16, "scale": "float8_e4m3fn", "tensor_scale": True, "weight_tile": (16, 16)},
    "mxfp4": {"block": 32, "scale": "float8_e8m0fnu", "tensor_scale": False, "weight_tile": (1, 32)},
}
#: torchao's NVFP4 training kernels (``nvfp4_mm_triton``) take a GEMM only when M, K and N are
#: all multiples of this
TORCHAO_NVFP4_MULTIPLE = 128
#: NVFP4's two-level scale: the per-tensor FP32 scale is 448 * 6 / tensor amax (TE
#: ``_quantize_blockwise_reference``: ``global_encode_scale``), so a block's E4M3 scale is
#: 448 * (block amax / tensor amax). That scale is a normal E4M3 number (full 4-bit precision)
#: while tensor amax / block amax stays within 448 / 2^-6 = 28672; beyond, the scale is
#: subnormal (fewer bits), and past 448 / 2^-10 = 458752 it rounds to 0 and the block is lost.
NVFP4_SCALE_WINDOW = FP8_FORMATS["float8_e4m3fn"]["max"] / FP8_FORMATS["float8_e4m3fn"]["smallest_normal"]
NVFP4_SCALE_FLUSH = FP8_FORMATS["float8_e4m3fn"]["max"] / (FP8_FORMATS["float8_e4m3fn"]["smallest_subnormal"] / 2)
#: E8M0 (OCP MX section 5.4.1): the exponent of a power of 2 from 2^-127 to 2^127 (255 is NaN)
E8M0_EXPONENTS = (-127, 127)
