"""What the FP8 rules (PA6xx) share: a linear's FP8 facts (``analysis.fp8``) as message values."""
from __future__ import annotations


def fp8_values(node) -> dict:
    facts = node["fp8"]
    return {"recipe": facts.recipe, "k": facts.k, "n": facts.n, "multiple": facts.multiple,
            "padded_k": facts.padded_k, "padded_n": facts.padded_n}
