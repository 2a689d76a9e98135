"""PA615 fp4-block-outlier: an input channel far above the others takes its block down with it."""
from __future__ import annotations

from ...core.numerics import FP4_FORMATS
from ..registry import Hit, check, param
from .fp4_range_values import base_values, measured, percent
from .plan_region import number

MAX_NAMED = 4  # channels named in the message


@check
def fp4_block_outlier(graph, name, node, target):
    found = measured(node)
    if found is None or found[1].input is None:
        return None
    facts, ranges = found
    channels, middle = ranges.outlier_channels(param("ratio"))
    if not channels:
        return None
    block = FP4_FORMATS[facts.format]["block"]
    error = ranges.neighbour_error(channels, block)
    if error is None or error < param("info_error"):
        return None
    blocks = {k - k % block for k in channels}
    others = ranges.channel_error(without=[j for b in blocks for j in range(b, b + block)])
    top = max(channels, key=lambda k: ranges.input["amax"][k])
    amax = ranges.input["amax"][top]
    named = ", ".join(str(k) for k in channels[:MAX_NAMED])
    if len(channels) > MAX_NAMED:
        named += f" (+{len(channels) - MAX_NAMED} more)"
    return Hit(name, {**base_values(facts, ranges), "channels": named, "count": len(channels), "block": block,
                      "amax": number(amax), "amax_text": f"{amax:.4g}", "median_text": f"{middle:.4g}",
                      "ratio": number(amax / middle), "ratio_text": f"{amax / middle:.3g}",
                      "error": number(error), "error_text": percent(error),
                      "others": number(others), "others_text": percent(others)},
               case=None if error >= param("warn_error") else "small")
