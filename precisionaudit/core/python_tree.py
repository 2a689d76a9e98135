"""The syntax tree of the Python text parsed last, for the stage that reads the same text
next: a scan's frontend parses a file to tell a model file from a training script, then the
training stage analyses that text and the suppressions read its statements (~10 ms a parse
for a 2,000-line script). One tree is kept, the last; nobody may change it."""
from __future__ import annotations

import ast

_kept: tuple[str, ast.Module] | None = None


def keep(text: str, tree: ast.Module) -> ast.Module:
    """Keep ``tree``, parsed from ``text``, for the next reader of the same text; returns it."""
    global _kept
    _kept = (text, tree)
    return tree


def kept(text: str) -> ast.Module | None:
    """The tree kept for this very text, or None."""
    return _kept[1] if _kept is not None and _kept[0] == text else None
