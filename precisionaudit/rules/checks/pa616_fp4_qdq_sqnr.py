"""PA616 fp4-qdq-sqnr: an FP4 Linear's input, weight or forward GEMM below torchao's SQNR floor."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp4_range_values import base_values, db, measured
from .plan_region import number

#: measured here on Gaussian tensors (runtime/pytorch/fp4.py): round trip / a Linear's output
TYPICAL = {"nvfp4": "20 dB through the round trip, 17 dB out of a GEMM",
           "mxfp4": "19 dB through the round trip, 15.5 dB out of a GEMM"}
PARTS = {"input": "input", "weight": "weight", "gemm": "forward GEMM's output"}


@check
def fp4_qdq_sqnr(graph, name, node, target):
    found = measured(node)
    if found is None:
        return None
    facts, ranges = found
    floors = {"input": param(f"qdq_{facts.format}"), "weight": param(f"qdq_{facts.format}"),
              "gemm": param(f"gemm_{facts.format}")}
    sqnr = {part: ranges.sqnr_db(part) for part in floors}
    below = {part: floors[part] - s for part, s in sqnr.items() if s is not None and s < floors[part]}
    if not below:
        return None
    worst = max(below, key=below.get)
    other = "nvfp4" if facts.format == "mxfp4" else None
    instead = f", or use --dtype {other} (16-value blocks, finer scales)" if other else ""
    return Hit(name, {**base_values(facts, ranges), "worst": PARTS[worst], "worst_sqnr": number(sqnr[worst]),
                      "worst_text": db(sqnr[worst]), "floor": floors[worst], "floor_text": db(floors[worst]),
                      "input_text": db(sqnr["input"]), "weight_text": db(sqnr["weight"]), "gemm_text": db(sqnr["gemm"]),
                      "typical_text": TYPICAL[facts.format], "instead": instead})
