"""What a training check is: how it registers (``training_check``) and what it returns
(``TrainingHit``). A leaf module: checks register here and ``audit`` looks them up here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: the kinds of file a check reads: a Python script (``source.Script``), a DeepSpeed JSON
#: config or an accelerate YAML config (``configs.Config``)
KINDS = ("script", "deepspeed", "accelerate")

#: a Python file longer than this is generated code, not a training script: it is only
#: syntax-checked (``audit.run_checks`` runs no check on it)
MAX_LINES = 20_000

#: (rule id, kind) -> check; one rule may read several kinds (PA421: FSDP calls and JSON)
CHECKS: dict = {}
#: (rule id, kind) -> ``mentions(text) -> bool``: False when the check cannot fire on a file
#: with that text, so a file no selected check needs is never parsed
MENTIONS: dict = {}


def training_check(rule_id: str, reads: str = "script", mentions=None):
    """Register the decorated function as ``rule_id``'s check over files of kind ``reads``.
    It is called with the parsed file and yields ``TrainingHit``s. ``mentions``, when
    given, is a cheap test of the file's text (substrings, no parsing) that is False
    where the check cannot fire."""
    if reads not in KINDS:
        raise ValueError(f"{rule_id}: a training check reads one of {KINDS}, not {reads!r}")

    def register(fn):
        CHECKS[(rule_id, reads)] = fn
        if mentions is not None:
            MENTIONS[(rule_id, reads)] = mentions
        return fn

    return register


@dataclass(frozen=True)
class TrainingHit:
    """One place a training rule fires."""

    line: int
    #: 1-based, where known
    column: int | None = None
    #: fill the rule's message and fix ``{placeholders}``; they are the finding's evidence
    values: Mapping = field(default_factory=dict)
    #: the path condition under which the hazard holds, in words ("when --fp16 is set");
    #: None when it holds on every path
    condition: str | None = None
    #: a case of the rule's ``severity_cases`` (None: the rule's severity)
    case: str | None = None
    #: where it is: the enclosing function or class (``Trainer.training_step``), or a config key
    scope: str = ""
    #: the call or key the finding is about (``clip_grad_norm_``, ``fp16.loss_scale``)
    subject: str | None = None
    #: this site's fix, on top of the rule's YAML ``fix`` (an ``edit`` that --fix applies)
    fix: Mapping = field(default_factory=dict)
