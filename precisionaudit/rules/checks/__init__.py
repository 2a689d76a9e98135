"""Python checks that rules/*.yaml reference by name (``check: <name>``).

One module per rule, named after it as ruff does (``pa105_exp_log_low_precision.py``
holds ``exp_log_low_precision``); helpers several rules share live in modules named for
what they do. ``check`` (register a function under its name), ``param`` (the running
rule's threshold), ``Hit`` and ``Fix`` (what a check returns) are the public names rule
packs use; they live in ``..registry``.

A node check is called as ``fn(graph, name, node, target)`` for each node the rule's
``match`` selects and returns a ``Hit`` or None. A graph check (``scope: graph``) is
called as ``fn(graph, target)`` and returns a list of ``Hit``. A rule pack's check may
still return the evidence dict (``case`` in it names the severity case) or, from a graph
check, ``(node name or None, evidence)``.
"""
import importlib
import pkgutil

from ..registry import CHECKS, Fix, Hit, check, param  # noqa: F401  (the public names)

#: the modules of the bundled rules' checks: importing them registers the checks
RULE_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("pa"))
for _module in RULE_MODULES:
    importlib.import_module(f"{__name__}.{_module}")
