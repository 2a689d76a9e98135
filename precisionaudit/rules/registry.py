"""The registry of Python checks and the ``param`` they read: a leaf module.

Checks register here and the engine looks them up here; neither imports the other, so
a check can read its rule's thresholds without importing the engine.
"""
from __future__ import annotations

import contextvars

#: check name (the YAML's ``check:``) -> function
CHECKS: dict = {}

#: the rule whose check is running (the engine sets it; ``param`` reads its thresholds)
running_rule: contextvars.ContextVar = contextvars.ContextVar("rule")


def check(fn):
    """Register ``fn`` as the check a rule names by ``fn.__name__``."""
    CHECKS[fn.__name__] = fn
    return fn


def param(name: str):
    """The threshold ``name`` of the rule whose check is running (its YAML ``params``)."""
    return running_rule.get().params[name]
