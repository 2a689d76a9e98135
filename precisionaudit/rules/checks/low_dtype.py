"""Where a node holds values in fp16/bf16: its result, its compute, its accumulator."""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW


def accumulates_low(node) -> bool:
    """The kernel's accumulator is fp16/bf16 (the kernel table's answer, else the compute dtype)."""
    kernel = node.get("kernel")
    return ((kernel and kernel.accumulate_dtype) or node["compute_dtype"]) in LOW


def low_dtype(node) -> str | None:
    """The low dtype the op stores its result in (or computes in), if any."""
    for dtype in (node.get("out_dtype"), node.get("compute_dtype")):
        if dtype in LOW:
            return dtype
    return None


def low_dtype_of(dtype: str | None) -> str | None:
    """``dtype`` if it is fp16/bf16, else None."""
    return dtype if dtype in LOW else None
