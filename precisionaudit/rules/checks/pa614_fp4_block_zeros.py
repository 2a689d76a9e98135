"""PA614 fp4-block-zeros: FP4 blocks that keep fewer than half their non-zero values."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp4_range_values import OPERANDS, base_values, block_name, measured, percent
from .plan_region import number


@check
def fp4_block_zeros(graph, name, node, target):
    found = measured(node)
    if found is None:
        return None
    facts, ranges = found
    shares = {t: ranges.block_share(t, "hollow") for t in OPERANDS if ranges.operand(t) is not None}
    if not shares:
        return None
    tensor = max(shares, key=shares.get)
    share = shares[tensor]
    if share < param("info_share"):
        return None
    return Hit(name, {**base_values(facts, ranges), "tensor": tensor, "block": block_name(facts.format, tensor),
                      "share": number(share), "share_text": percent(share),
                      "zeros": number(ranges.zero_share(tensor)), "zeros_text": percent(ranges.zero_share(tensor))},
               case=None if share >= param("warn_share") else "small")
