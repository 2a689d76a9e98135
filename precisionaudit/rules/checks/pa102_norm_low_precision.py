"""PA102 norm-low-precision: normalisation statistics (mean/variance) kept in fp16/bf16, as
hand-written norms do.
"""
from __future__ import annotations

from dataclasses import replace

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import producers
from ..registry import Fix, Hit, check
from .low_dtype import accumulates_low


@check
def norm_low_precision(graph, name, node, target):
    """Norms whose kernel keeps its statistics in low precision, and hand-written norms."""
    hit = _norm_hazard(graph, name, node, target)
    if hit is None:
        return None
    dtype = hit.values.get("statistic_dtype") or node["compute_dtype"]
    problem = ("a square above 256 overflows float16's 65504 and E[x^2] - E[x]^2 cancels"
               if dtype == "float16" else f"E[x^2] - E[x]^2 cancels with {dtype}'s 8 significand bits")
    return replace(hit, values={**hit.values, "problem": problem})


def _norm_hazard(graph, name, node, target):
    if node["op"] == "batch_norm" and target.mode == "autocast":
        return None  # cuDNN/native BN take fp32 weights and accumulate statistics in fp32
    norm = node.get("norm")
    pattern = norm.pattern if norm else None
    if node["op"] in ("mean", "sum", "rsqrt", "sqrt") and not pattern:
        return None
    if pattern == "mean of squares":
        if _squares_low(node):
            # (c * c).mean() overflows in the square: the fix moves both to fp32
            square = graph.nodes[norm.square_node]["op"]
            return Hit(name, {"pattern": pattern,
                              "statistic_dtype": norm.square_dtype or node["compute_dtype"]},
                       fix=Fix(ops=tuple(dict.fromkeys([square, node["op"]]))))
        return None
    if not node["precision"].low_precision:
        return None
    if pattern == "rsqrt of a variance":
        return None if _variance_already_reported(graph, name) else Hit(name, {"pattern": pattern})
    kernel = node.get("kernel")
    if (kernel and not kernel.computes_statistics) or not accumulates_low(node):
        return None  # eval-mode batch norm, or a fused kernel with fp32 statistics (kernels.py)
    return Hit(name, {"pattern": node["op"]})


def _variance_already_reported(graph, name) -> bool:
    """The hand-written variance feeding this rsqrt/sqrt is itself flagged: report it once."""
    for p in producers(graph, name):
        candidates = [p, *producers(graph, p)] if graph.nodes[p]["op"] == "add" else [p]
        for c in candidates:
            node = graph.nodes[c]
            norm = node.get("norm")
            if norm and norm.pattern == "mean of squares" and _squares_low(node):
                return True
    return False


def _squares_low(node) -> bool:
    """A mean of squares computes, or squares, in fp16/bf16."""
    return node["precision"].low_precision or node["norm"].square_dtype in LOW
