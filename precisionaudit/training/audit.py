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
    from .source import Script, check_syntax, read_text

    chosen = [r for r in rules if r.scope == "training"]
    if not chosen:
        return []
    kind, text = "script", read_text(path)
    selected = [(rule, CHECKS.get((rule.id, kind))) for rule in chosen]
    selected = [(rule, check) for rule, check in selected if check is not None]
    if not _may_find(selected, text):
        check_syntax(path, text)
        return []
    subject = Script(path, text)
    findings = []
    for rule, check in selected:
        findings += [training_finding(rule, path, hit) for hit in check(subject)]
    return findings


def _may_find(selected, text: str) -> bool:
    """False when every selected check names the words it needs and none occurs in
    ``text``: most Python files never mention a scaler or autocast, and LibCST's parse and
    name resolution are the cost of a scan."""
    for _, check in selected:
        words = getattr(check, "mentions", None)
        if words is None or (words(text) if callable(words) else any(word in text for word in words)):
            return True
    return False
