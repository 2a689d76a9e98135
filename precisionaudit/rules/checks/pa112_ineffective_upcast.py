"""PA112 ineffective-upcast: an explicit .float() feeds an op that autocast casts back down."""
from __future__ import annotations

from ...analysis.facts import fact
from ...core.numerics import EXACT_INTEGER_LIMIT
from ...ir.graph import consumers
from ..registry import Hit, check


@check
def ineffective_upcast(graph, name, node, target):
    if target.mode != "autocast" or node["out_dtype"] != "float32":
        return None
    undone = [c for c in consumers(graph, name)
              if graph.nodes[c]["autocast_cast"] and graph.nodes[c]["precision"].low_precision]
    if not undone:
        return None
    first = graph.nodes[undone[0]]
    values = {"undone_by": undone[0], "undone_op": first["op"], "undone_line": first["line"]}
    bound, limit = fact(node, "integer.largest"), EXACT_INTEGER_LIMIT.get(target.dtype)
    if bound is not None and limit is not None and bound > limit:
        # the upcast was protecting integers (positions) the autocast dtype cannot hold exactly
        return Hit(name, {**values, "max_value": bound, "exact_limit": limit}, case="integers")
    return Hit(name, values)
