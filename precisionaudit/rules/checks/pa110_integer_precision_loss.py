"""PA110 integer-precision-loss: integer-valued data (positions, indices, counts) in a
float dtype past its exact range.
"""
from __future__ import annotations

from ...analysis.facts import fact
from ...core.numerics import EXACT_INTEGER_LIMIT
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import producers
from ..registry import Hit, check


@check
def integer_precision_loss(graph, name, node, target):
    dtype = node["out_dtype"]
    bound = fact(node, "integer.largest")
    if dtype not in LOW or bound is None:
        return None
    limit = EXACT_INTEGER_LIMIT[dtype]
    if bound <= limit:
        return None
    for p in producers(graph, name):  # report where the loss starts, not every op after it
        before = graph.nodes[p]
        if before["out_dtype"] == dtype and (fact(before, "integer.largest") or 0) > limit:
            return None
    return Hit(name, {"max_value": bound, "exact_limit": limit})
