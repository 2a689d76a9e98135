"""The canonical name of a live torch function (the names themselves: ``core.op_names``)."""
from __future__ import annotations

from torch.overrides import resolve_name

from ...core.op_names import CAST_FNS, GEMM_OPS, QUERIES, canonical_name

__all__ = ["CAST_FNS", "GEMM_OPS", "QUERIES", "canonical_fn_name", "canonical_name"]


def canonical_fn_name(func) -> str:
    """'matmul' for Tensor.__matmul__, 'softmax' for F.softmax, 'mul' for __rmul__."""
    name = getattr(func, "__name__", None) or resolve_name(func) or str(func)
    if name == "__get__":  # properties such as Tensor.shape
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return canonical_name(name)
