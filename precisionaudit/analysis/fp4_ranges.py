"""The FP4 measurements of the range pass (--weights / --data under --dtype nvfp4|mxfp4) onto
the linear nodes of the Linears they were measured on: one ``Fp4RangeFacts`` under
``node["fp4_range"]``.

The range pass measures per ``nn.Linear`` module (its forward hook), so every linear node of
that module (a Linear called twice: both) gets the module's counts, merged over its calls.
Nothing is written without an FP4 target or without measurements.
"""
from __future__ import annotations

from .facts import Fp4RangeFacts


def annotate(graph):
    fmt = getattr(graph.graph.get("target"), "fp4", None)
    measured = graph.graph.get("fp4_ranges")
    if not fmt or not measured:
        return
    for _, node in graph.nodes(data=True):
        record = measured.get(node.get("module") or "")
        if "fp4" in node and node["op"] == "linear" and record is not None:
            node["fp4_range"] = Fp4RangeFacts(format=record["format"], calls=record["calls"], weight=record["weight"],
                                              input=record["input"], gemm=record["gemm"], wgrad=record["wgrad"])
