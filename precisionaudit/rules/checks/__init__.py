"""Python checks that rules/*.yaml reference by name (``check: <name>``).

A node check is called as ``fn(graph, name, node, target)`` for each node the rule's
``match`` selects and returns evidence (a dict; ``severity`` in it overrides the rule's)
or None. A graph check (``scope: graph``) is called as ``fn(graph, target)`` and returns
a list of ``(node name or None, evidence)``.
"""
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


from . import bounded, measured, precision, shapes  # noqa: E402,F401  (registers the checks)
