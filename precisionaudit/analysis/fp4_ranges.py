"""The FP4 measurements of the range pass (--weights / --data under --dtype nvfp4|mxfp4) onto
the linear nodes of the Linears they were measured on: one ``Fp4RangeFacts`` under
``node["fp4_range"]``. Filled in with the range pass."""
from __future__ import annotations


def annotate(graph):
    return
