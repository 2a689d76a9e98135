"""PA604 fp8-scaled-underflow: rows (tokens, or weight output rows) of an FP8 Linear's
operand that the recipe's scale pushes so far down E4M3's range that they lose bits."""
from __future__ import annotations

from ..registry import Hit, check, param
from .fp8_gemms import fp8_values
from .fp8_range_values import COMPARED, by_recipe, calls_text, keeping, percent
from .plan_region import number


@check
def fp8_scaled_underflow(graph, name, node, target):
    facts, measured = node.get("fp8"), node.get("fp8_range")
    if facts is None or measured is None or not facts.runs_fp8:
        return None
    level = param("row_error")
    shares = {t: measured.rows_share(level, t) for t in ("input", "weight")}
    tensor = max(shares, key=lambda t: shares[t] or 0.0)
    share = shares[tensor]
    if share is None or share < param("info_share"):
        return None
    per_recipe = {r: measured.rows_share(level, tensor, r) for r in COMPARED}
    better = keeping(per_recipe, param("info_share"), measured.scheme)
    instead = f", or use --recipe {better[0]} (its share: {percent(per_recipe[better[0]])})" if better else ""
    rows = "token rows" if tensor == "input" else "output rows"
    return Hit(name, {**fp8_values(node), "tensor": tensor, "rows": rows, "share": number(share),
                      "share_text": percent(share), "level_text": percent(level),
                      "flushed_text": percent(measured.flushed_share(tensor)), "by_recipe": by_recipe(per_recipe),
                      "calls": measured.calls, "calls_text": calls_text(measured.calls), "scheme": measured.scheme, "instead": instead},
               case=None if share >= param("warn_share") else "small")
