"""A training check's hit as a ``Finding`` of the scan's schema (docs/json-report.md)."""
from __future__ import annotations

from ..core.findings import Finding
from ..rules.engine import format_template


def training_finding(rule, path: str, hit) -> Finding:
    """The finding ``rule`` reports for ``hit`` (a ``registry.TrainingHit``) in ``path``.

    A hit that holds only on some paths says so after the message: "(when --fp16 is set)".
    """
    values = dict(hit.values)
    message = format_template(rule, rule.message, values)
    if hit.condition:
        message += f" ({hit.condition})"
    fix = {k: _filled(rule, v, values) for k, v in rule.fix.items()}
    fix.update(hit.fix)
    evidence = {**values, **({"condition": hit.condition} if hit.condition else {})}
    return Finding(rule=rule.id, name=rule.name, severity=rule.severity_for("default", hit.case),
                   path=path, line=hit.line, column=hit.column, model=path, node=None,
                   op=hit.subject, module=hit.scope, message=message, evidence=evidence, fix=fix)


def _filled(rule, value, values):
    if isinstance(value, str):
        return format_template(rule, value, values)
    if isinstance(value, list):
        return [_filled(rule, v, values) for v in value]
    return value
