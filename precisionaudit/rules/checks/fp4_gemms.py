"""What the FP4 rules (PA61x) share: a linear's FP4 facts (``analysis.fp4``) as message values,
and the blocks NVIDIA's NVFP4 recipe keeps in bf16."""
from __future__ import annotations

from .fp8_gemms import rank_text


def fp4_values(node, target) -> dict:
    facts = node["fp4"]
    return {"format": facts.format, "k": facts.k, "n": facts.n, "multiple": facts.multiple,
            "rank": rank_text(facts, target), "padded_k": facts.padded_k, "padded_n": facts.padded_n}


def recipe_blocks(blocks: int, first_share: float, last_share: float) -> tuple[int, int]:
    """(first, last): how many blocks of a stack of ``blocks`` the recipe keeps in bf16 at
    each end: the shares rounded, at least the last block, never the whole stack."""
    last = max(1, round(blocks * last_share))
    first = round(blocks * first_share)
    if first + last >= blocks:
        first, last = 0, max(1, blocks - 1)
    return first, last


def block_ranges(indices) -> str:
    """"0, 28-31" for [0, 28, 29, 30, 31]."""
    indices = sorted(indices)
    runs, start = [], None
    for i, b in enumerate(indices):
        if start is None:
            start = b
        if i + 1 == len(indices) or indices[i + 1] != b + 1:
            runs.append(str(start) if start == b else f"{start}-{b}")
            start = None
    return ", ".join(runs)
