"""Wording shared by the reports' one-line notes."""
from __future__ import annotations


def first_few(names, shown: int = 3) -> str:
    """'a, b, c and 4 more': the first ``shown`` of ``names`` and how many are left out."""
    names = list(names)
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")
