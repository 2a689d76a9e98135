"""What a Python check is: how it registers (``check``), what it reads (``param``) and what
it returns (``Hit``). A leaf module: checks register here and the engine looks them up
here; neither imports the other.
"""
from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Fix:
    """How one site's fix differs from its rule's YAML ``fix``."""

    #: the whole chain of ops that must move to fp32 (replaces the rule's ``fix.ops``)
    ops: tuple | None = None
    #: modules that are nothing but a planned op (T5's ``wo``): a plan keeps them whole
    whole_modules: tuple = ()
    #: a code change for a site the rule's usual fix cannot mend (a plan cannot change the
    #: dtype of a tensor written in place): replaces the fix's keys it names
    instead: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """A place a rule fires, as its check reports it.

    ``values`` fill the rule's message and fix ``{placeholders}`` and are the finding's
    evidence; the other fields are what the engine itself reads.
    """

    node: str | None
    values: Mapping = field(default_factory=dict)
    #: a case of the rule's ``severity_cases`` (None: the rule's severity for the dtype)
    case: str | None = None
    #: the module the finding names, when not the node's (a graph check's owner of a weight)
    module: str | None = None
    #: the line the finding points at, when not the node's
    line: int | None = None
    fix: Fix = Fix()
