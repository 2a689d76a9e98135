"""The training stage's entry point: one file (script or config) -> findings of the
training rules that were selected."""
from __future__ import annotations

from .findings import training_finding
from .registry import CHECKS


def audit_file(path: str, rules) -> list:
    """Findings of the ``scope: training`` rules among ``rules`` for the script at ``path``.

    The file is parsed, never run; a file that cannot be parsed is a UsageError naming it.
    """
    from . import checks  # noqa: F401 - registers the bundled checks
    from .source import read_script

    chosen = [r for r in rules if r.scope == "training"]
    if not chosen:
        return []
    kind, subject = "script", read_script(path)
    findings = []
    for rule in chosen:
        check = CHECKS.get((rule.id, kind))
        if check is not None:
            findings += [training_finding(rule, path, hit) for hit in check(subject)]
    return findings
