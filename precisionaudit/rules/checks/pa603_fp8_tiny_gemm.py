"""PA603 fp8-tiny-gemm: an FP8 linear too small for FP8 to beat bf16."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp8_gemms import fp8_values


@check
def fp8_tiny_gemm(graph, name, node, target):
    facts = node.get("fp8")
    if facts is None or not facts.runs_fp8 or facts.output_head:
        return None  # the head has PA602
    if facts.k * facts.n <= param("max_weight_elements"):
        return Hit(name, fp8_values(node))
    return None
