"""PA614 fp4-block-zeros: FP4 blocks that keep fewer than half their non-zero values."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp4_range_values import percent, worst_blocks
from .plan_region import number


@check
def fp4_block_zeros(graph, name, node, target):
    found = worst_blocks(node, lambda ranges, tensor: ranges.block_share(tensor, "hollow"), param("share"),
                         param("share"))
    if found is None:
        return None
    _, ranges, values, case = found
    zeros = ranges.zero_share(values["tensor"])
    return Hit(name, {**values, "zeros": number(zeros), "zeros_text": percent(zeros)}, case=case)
