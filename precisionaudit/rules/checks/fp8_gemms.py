"""What the FP8 rules (PA6xx) share: a linear's FP8 facts (``analysis.fp8``) as message values."""
from __future__ import annotations


def rank_text(facts, target) -> str:
    """", one rank's of --tp 8, column-parallel" for a Linear judged per rank; "" without --tp."""
    tp = getattr(target, "tp", 1)
    return f", one rank's of --tp {tp}, {facts.split}-parallel" if tp > 1 else ""


def fp8_values(node, target=None) -> dict:
    facts = node["fp8"]
    return {"recipe": facts.recipe, "k": facts.k, "n": facts.n, "multiple": facts.multiple,
            "padded_k": facts.padded_k, "padded_n": facts.padded_n, "rank": rank_text(facts, target)}
