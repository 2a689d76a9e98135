"""What the measured FP4 rules (PA613-PA617) share: the facts they read, and numbers as text."""
from __future__ import annotations

from .fp8_range_values import calls_text, percent  # noqa: F401  (the same words as the FP8 rules)

FORMAT_NAMES = {"nvfp4": "NVFP4", "mxfp4": "MXFP4"}
OPERANDS = ("input", "weight")


def measured(node):
    """(FP4 facts, measured facts) of a linear node that runs in FP4 and was measured; None else."""
    facts, ranges = node.get("fp4"), node.get("fp4_range")
    if facts is None or ranges is None or not facts.runs_fp4:
        return None
    return facts, ranges


def worst_blocks(node, share, info_share: float, warn_share: float):
    """The block-share rules' common part (PA613, PA614): of a measured FP4 linear's operands,
    the one whose ``share(ranges, tensor)`` is largest, when at least ``info_share``: (facts,
    ranges, the values every such message names, the severity case); None otherwise."""
    found = measured(node)
    if found is None:
        return None
    facts, ranges = found
    shares = {t: share(ranges, t) for t in OPERANDS if ranges.operand(t) is not None}
    if not shares or max(shares.values()) < info_share:
        return None
    tensor = max(shares, key=shares.get)
    values = {**base_values(facts, ranges), "tensor": tensor, "block": block_name(facts.format, tensor),
              "share": float(shares[tensor]), "share_text": percent(shares[tensor])}
    return facts, ranges, values, None if shares[tensor] >= warn_share else "small"


def db(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} dB"


def block_name(fmt: str, tensor: str) -> str:
    """How ``tensor``'s blocks are shaped under ``fmt``: "16-value", "16x16", "32-value"."""
    if fmt == "nvfp4":
        return "16x16" if tensor == "weight" else "16-value"
    return "32-value"


def base_values(facts, ranges) -> dict:
    return {"format": facts.format, "format_name": FORMAT_NAMES[facts.format], "calls": ranges.calls,
            "calls_text": calls_text(ranges.calls)}
