"""The precision target a scan judges against, kept free of torch so the CLI starts fast.

pre-commit hands the hook every changed Python file; most are not models, and deciding
that must not cost a 1-2 s torch import.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float16", "bfloat16")
MODES = ("autocast", "pure")
DEVICES = ("cuda", "cpu")


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
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def as_dict(self) -> dict:
        return {"dtype": self.dtype, "mode": self.mode, "device": self.device}
