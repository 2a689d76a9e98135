"""The precision target a scan judges against, and the numeric facts of each dtype."""
from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPES = ("float16", "bfloat16")
MODES = ("autocast", "pure")
DEVICES = ("cuda", "cpu")

LOW_PRECISION = (torch.float16, torch.bfloat16)

#: Largest integer N such that every integer in [0, N] is exact in the dtype.
EXACT_INTEGER_LIMIT = {torch.float16: 2048, torch.bfloat16: 256, torch.float32: 2**24}


@dataclass(frozen=True)
class Target:
    """Which autocast policy (or pure low-precision model) the ops are judged under."""

    dtype: str = "float16"
    mode: str = "autocast"
    device: str = "cuda"

    def __post_init__(self):
        for value, allowed, what in ((self.dtype, DTYPES, "dtype"), (self.mode, MODES, "mode"),
                                     (self.device, DEVICES, "device")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def as_dict(self) -> dict:
        return {"dtype": self.dtype, "mode": self.mode, "device": self.device}


def dtype_name(dtype) -> str | None:
    """'float16' for torch.float16; None stays None."""
    return None if dtype is None else str(dtype).replace("torch.", "")


def is_low(dtype) -> bool:
    return dtype in LOW_PRECISION


def finfo(dtype):
    return torch.finfo(dtype)


def rounds_to(value: float, dtype: torch.dtype) -> float:
    """What a Python float becomes when stored in `dtype` (inf on overflow, 0 on underflow)."""
    return torch.tensor(value, dtype=torch.float64).to(dtype).item()
