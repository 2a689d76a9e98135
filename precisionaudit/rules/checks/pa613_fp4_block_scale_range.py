"""PA613 fp4-block-scale-range: NVFP4 blocks whose E4M3 scale leaves its normal range or is 0."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp4_range_values import db, percent, worst_blocks
from .plan_region import number


def _outside(ranges, tensor) -> float:
    return ranges.block_share(tensor, "subnormal") + ranges.block_share(tensor, "flushed")


@check
def fp4_block_scale_range(graph, name, node, target):
    found = worst_blocks(node, _outside, param("info_share"), param("warn_share"))
    if found is None:
        return None
    _, ranges, values, case = found
    flushed = ranges.block_share(values["tensor"], "flushed")
    return Hit(name, {**values, "flushed": number(flushed), "flushed_text": percent(flushed),
                      "sqnr_text": db(ranges.sqnr_db(values["tensor"]))}, case=case)
