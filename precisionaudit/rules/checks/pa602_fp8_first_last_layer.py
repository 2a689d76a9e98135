"""PA602 fp8-first-last-layer: the output head converted to FP8."""
from __future__ import annotations

from ..registry import Hit, check
from .fp8_gemms import fp8_values


@check
def fp8_first_last_layer(graph, name, node, target):
    facts = node.get("fp8")
    if facts is None or not facts.runs_fp8 or not facts.output_head:
        return None
    tied = f", its weight tied to {facts.tied_to}" if facts.tied_to else ""
    return Hit(name, {**fp8_values(node), "tied": tied})
