"""PA101 softmax-low-precision: a softmax accumulates in fp16/bf16, or its fp16/bf16
probabilities feed a log or a division.
"""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...core.numerics import SMALLEST_SUBNORMAL
from ..registry import Hit, check
from .low_dtype import accumulates_low


@check
def softmax_low_precision(graph, name, node, target):
    """A softmax kernel accumulating in low precision (one the kernel table does not know, such
    as ONNX Runtime's), or low-precision probabilities fed to a log or a division. A softmax
    written by hand is reported where it goes wrong: its exp (PA105) and its sum (PA103)."""
    if node["op"] in ("softmax", "log_softmax") and accumulates_low(node):
        return Hit(name, {"problem": f"accumulates its exponentials and their sum in {node['compute_dtype']}: "
                                       "they overflow or lose precision"})
    probs = node.get("softmax")
    if probs is None or not probs.probs_consumer or node["out_dtype"] not in LOW:
        return None
    consumer = probs.probs_consumer
    use = graph.nodes[consumer]
    dtype = node["out_dtype"]
    tiny = SMALLEST_SUBNORMAL[dtype]
    harm = "takes their log" if use["op"].startswith("log") else "divides by them"
    result = "-inf" if use["op"].startswith("log") else "inf"
    return Hit(name, {"problem": f"stores its probabilities in {dtype} and {use['op']} (line {use['line']}) "
                                 f"{harm}: probabilities below {tiny:.1e} are 0 in {dtype} and give {result}",
                      "pattern": probs.kind, "consumer": consumer})
