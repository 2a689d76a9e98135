"""Python checks that rules/*.yaml reference by name (``check: <name>``).

``check`` (register a function under its name) and ``param`` (the running rule's
threshold) are the public names rule packs use; they live in ``..registry``.

A node check is called as ``fn(graph, name, node, target)`` for each node the rule's
``match`` selects and returns evidence (a dict) or None. A graph check (``scope: graph``)
is called as ``fn(graph, target)`` and returns a list of ``(node name or None, evidence)``.
"""
from ..registry import CHECKS, check, param  # noqa: F401  (the public names)

from . import bounded, measured, precision, shapes  # noqa: E402,F401  (registers the checks)
