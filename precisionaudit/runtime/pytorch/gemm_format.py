"""Which quantized format the GEMM running now stands for, while its fp32 stand-in runs.

The FP8 and FP4 emulations (``fp8.py``, ``fp4.py``) compute a quantized GEMM as an fp32 matmul
of dequantized operands; the FLOP counter (``check/pytorch/flops.py``) counts that matmul as
the format it stands for, not as fp32.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

_FORMAT: ContextVar[str | None] = ContextVar("precisionaudit_gemm_format", default=None)


@contextlib.contextmanager
def quantized_gemm(name: str):
    """The GEMMs run inside are ``name``'s (``float8_e4m3fn``, ``float4_e2m1fn``)."""
    token = _FORMAT.set(name)
    try:
        yield
    finally:
        _FORMAT.reset(token)


def current() -> str | None:
    """The format of the quantized GEMM whose stand-in runs now; None outside one."""
    return _FORMAT.get()
