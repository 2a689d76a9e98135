"""PA107 unrepresentable-constant: a constant (fill value, eps, scale, mask) overflows or
underflows in the dtype it meets.
"""
from __future__ import annotations

from ..registry import Fix, Hit, check


@check
def unrepresentable_constant(graph, name, node, target):
    bad = [c for c in node["constant"].uses if c.status in ("overflow", "underflow")]
    if not bad:
        return None
    worst = next((c for c in bad if c.status == "overflow"), bad[0])
    values = {"value": worst.value, "value_text": f"{worst.value:g}", "stored": worst.stored,
              "status": worst.status,
              "becomes": ("-inf" if worst.value < 0 else "inf") if worst.status == "overflow" else "0"}
    fix = Fix()
    if node["op"] == "setitem" or node["op"].endswith("_"):
        # t[i] = value, t.fill_(value), t.masked_fill_(...) keep t's dtype: no fp32 region changes it
        fix = Fix(instead={"action": "replace",
                           "use": f"a value {worst.dtype} holds (torch.finfo(t.dtype).max or .min)"})
    return Hit(name, values, case="underflow" if worst.status == "underflow" else None, fix=fix)
