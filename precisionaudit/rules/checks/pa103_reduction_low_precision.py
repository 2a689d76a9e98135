"""PA103 reduction-low-precision: a reduction that accumulates in fp16/bf16 (cumsum/cumprod
on CUDA), or stores a growing result (sum/prod/var) in fp16.
"""
from __future__ import annotations

from ...analysis.facts import fact
from ..registry import Hit, check, param
from .low_dtype import accumulates_low


#: reductions whose result grows with the extent (or is a squared magnitude): their stored
#: result can pass fp16's 65504 even when the kernel accumulates in fp32. Not a vector norm:
#: its result is at most sqrt(n) times the largest element (the squares stay in the fp32
#: accumulator), so it leaves fp16's range only for inputs whose RMS is above 65504/sqrt(n)
GROWING = {"sum", "nansum", "prod", "var", "var_mean"}


@check
def reduction_low_precision(graph, name, node, target):
    if node.get("norm"):
        return None  # reported as a hand-written norm (PA102)
    extent, accumulates = fact(node, "reduction.extent"), fact(node, "kernel.accumulate_dtype")
    dtype = node["compute_dtype"]
    if accumulates_low(node):
        problem = (f"reduces {extent} elements and accumulates in {dtype}: the running value "
                   "leaves its range or stops taking small increments")
    elif node["op"] in GROWING and dtype == "float16":
        problem = (f"accumulates in {accumulates} but stores the result over {extent} "
                   "elements in float16, whose range ends at 65504")
    else:
        return None  # fp32 accumulator and a result within the input's range (or bf16's)
    short = extent is not None and extent < param("short_extent")
    return Hit(name, {"extent": extent, "problem": problem, "accumulate_dtype": accumulates},
               case="short" if short else None)
