"""PA601 fp8-gemm-dims: an nn.Linear whose K or N is not a multiple of 16 (32 for MXFP8)."""
from __future__ import annotations

from ..registry import Hit, check
from .fp8_gemms import fp8_values


@check
def fp8_gemm_dims(graph, name, node, target):
    facts = node.get("fp8")
    if facts is None or facts.runs_fp8 or facts.k is None or facts.n is None:
        return None
    if not facts.k % facts.multiple and not facts.n % facts.multiple:
        return None  # it falls back for another reason (an F.linear call)
    return Hit(name, fp8_values(node))
