"""Numeric facts of each dtype; the Target itself lives in target.py (no torch import)."""
from __future__ import annotations

import torch

from .target import DEVICES, DTYPES, MODES, Target  # noqa: F401  (re-exported)

#: the low-precision dtypes a target can name, as torch dtypes and as the IR's names
LOW_PRECISION = (torch.float16, torch.bfloat16)
LOW_PRECISION_NAMES = frozenset(DTYPES)

#: Largest integer N such that every integer in [0, N] is exact in the dtype.
EXACT_INTEGER_LIMIT = {torch.float16: 2048, torch.bfloat16: 256, torch.float32: 2**24}


def dtype_name(dtype) -> str | None:
    """'float16' for torch.float16; None stays None."""
    return None if dtype is None else str(dtype).replace("torch.", "")


def rounds_to(value: float, dtype: torch.dtype) -> float:
    """What a Python float becomes when stored in `dtype` (inf on overflow, 0 on underflow)."""
    return torch.tensor(value, dtype=torch.float64).to(dtype).item()
