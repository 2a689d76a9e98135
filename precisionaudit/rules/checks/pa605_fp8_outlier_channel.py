"""PA605 fp8-outlier-channel: an input channel of an FP8 Linear whose measured amax is far
above the others', so the shared scales leave the other channels with bits lost in E4M3."""
from __future__ import annotations

from ...analysis.facts import median
from ..registry import Hit, check, param
from .fp8_gemms import fp8_values
from .fp8_range_values import COMPARED, by_recipe, calls_text, keeping, percent
from .plan_region import number

MAX_NAMED = 4  # channels named in the message


@check
def fp8_outlier_channel(graph, name, node, target):
    facts, measured = node.get("fp8"), node.get("fp8_range")
    if facts is None or measured is None or not facts.runs_fp8:
        return None
    channels, middle = measured.outlier_channels(param("ratio"))
    if not channels:
        return None
    others = {r: _median_error(measured, r, channels) for r in COMPARED}
    error = others[measured.scheme]
    if error is None or error < param("info_error"):
        return None  # E4M3's range holds the other channels under this recipe
    top = max(channels, key=lambda k: measured.input["amax"][k])
    amax = measured.input["amax"][top]
    named = ", ".join(str(k) for k in channels[:MAX_NAMED])
    if len(channels) > MAX_NAMED:
        named += f" (+{len(channels) - MAX_NAMED} more)"
    kept_by = keeping(others, param("info_error"), measured.scheme)
    keeps = (f"--recipe {' or '.join(kept_by)} keeps them (measured)" if kept_by else
             "no FP8 recipe keeps them: every row's and block's scale holds the outlier")
    return Hit(name, {**fp8_values(node), "channels": named, "count": len(channels),
                      "amax": number(amax), "amax_text": f"{amax:.4g}", "median_text": f"{middle:.4g}",
                      "ratio": number(amax / middle), "ratio_text": f"{amax / middle:.3g}",
                      "error": number(error), "error_text": percent(error), "by_recipe": by_recipe(others),
                      "keeps": keeps, "calls": measured.calls, "calls_text": calls_text(measured.calls)},
               case=None if error >= param("warn_error") else "small")


def _median_error(measured, scheme, channels) -> float | None:
    errors = measured.channel_errors(scheme, without=tuple(channels))
    return None if errors is None else median(errors)
