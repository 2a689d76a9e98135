"""PA613 fp4-block-scale-range: NVFP4 blocks whose E4M3 scale leaves its normal range or is 0."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp4_range_values import OPERANDS, base_values, block_name, db, measured, percent
from .plan_region import number


@check
def fp4_block_scale_range(graph, name, node, target):
    found = measured(node)
    if found is None:
        return None
    facts, ranges = found
    shares = {t: ranges.block_share(t, "subnormal") + ranges.block_share(t, "flushed")
              for t in OPERANDS if ranges.operand(t) is not None}
    if not shares:
        return None
    tensor = max(shares, key=shares.get)
    share = shares[tensor]
    if share < param("info_share"):
        return None
    return Hit(name, {**base_values(facts, ranges), "tensor": tensor, "block": block_name(facts.format, tensor),
                      "share": number(share), "share_text": percent(share),
                      "flushed": number(ranges.block_share(tensor, "flushed")),
                      "flushed_text": percent(ranges.block_share(tensor, "flushed")),
                      "sqnr_text": db(ranges.sqnr_db(tensor))},
               case=None if share >= param("warn_share") else "small")
