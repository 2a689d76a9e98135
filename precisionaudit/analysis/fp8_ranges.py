"""The FP8 error counts of the range pass (--data under --dtype float8) onto the linear nodes
of the Linears they were measured on: one ``Fp8RangeFacts`` under ``node["fp8_range"]``.

The range pass measures per ``nn.Linear`` module (its forward pre-hook), so every linear node
of that module (a Linear called twice: both) gets the module's counts, merged over its calls.
Nothing is written without an FP8 target or without --data.
"""
from __future__ import annotations

from .facts import Fp8RangeFacts

#: the scaling each recipe's forward GEMM uses: Transformer Engine's delayed scaling takes
#: the largest amax of earlier steps, never below the current one (tensorwise's); torchao's
#: rowwise_with_gw_hp differs from rowwise in the backward only
SCHEME_OF = {"tensorwise": "tensorwise", "delayed": "tensorwise", "rowwise": "rowwise",
             "rowwise_with_gw_hp": "rowwise", "mxfp8": "mxfp8"}


def facts_of(record: dict, recipe: str) -> Fp8RangeFacts:
    return Fp8RangeFacts(recipe=recipe, scheme=SCHEME_OF[recipe], calls=record["calls"],
                         levels=tuple(record["levels"]), input=record["input"], weight=record.get("weight"))


def annotate(graph):
    recipe = getattr(graph.graph.get("target"), "recipe", None)
    measured = graph.graph.get("fp8_ranges")
    if not recipe or not measured:
        return
    for _, node in graph.nodes(data=True):
        record = measured.get(node.get("module") or "")
        if "fp8" in node and node["op"] == "linear" and record is not None:
            node["fp8_range"] = facts_of(record, recipe)
