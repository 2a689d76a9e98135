"""Helpers the PA405-PA407 checks share: where a finding is (its enclosing def/class)."""
from __future__ import annotations

import libcst as cst


def scope_name(script, node) -> str:
    """``Trainer.setup`` for a node in that method, ``main`` in a function, "" at module level."""
    names = []
    parent = script.parents.get(node)
    while parent is not None:
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            names.append(parent.name.value)
        parent = script.parents.get(parent)
    return ".".join(reversed(names))
