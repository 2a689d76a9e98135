"""Findings: what a rule reports, in the shape of the JSON report contract."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

#: fix actions an override plan implements (disable_autocast: an op autocast casts back down
#: after an explicit .float() runs with autocast off, which is what a region does), and the
#: least severity ``precisionaudit plan`` turns into overrides by default.
PLANNED_ACTIONS = ("keep_fp32", "disable_autocast")
#: every fix action a rule may name: the planned ones, and the code or shape changes the
#: reports spell out (use another function, return float32 outputs, pad a dimension, and an
#: ``edit`` of training code: ``to`` says it in words; ``scan --fix`` applies those it can)
FIX_ACTIONS = (*PLANNED_ACTIONS, "replace", "cast_output", "pad", "edit")
PLAN_MIN_SEVERITY = "warning"


def code_covers(code: str, rule_id: str) -> bool:
    """True when ``code`` of a select/ignore/suppress list (a rule id, a prefix such as
    ``PA1``, or ``ALL``; any case) stands for the rule ``rule_id``."""
    code = code.upper()
    return code == "ALL" or rule_id.startswith(code)


@dataclass
class Finding:
    rule: str
    name: str
    severity: str
    path: str
    line: int | None
    model: str
    node: str | None
    op: str | None
    module: str
    message: str
    evidence: dict = field(default_factory=dict)
    fix: dict = field(default_factory=dict)
    fingerprint: str = ""
    column: int | None = None  # 1-based; None where only the line (or nothing) is known

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in (
            "rule", "name", "severity", "path", "line", "column", "model", "node", "op", "module",
            "message", "evidence", "fix", "fingerprint")}


def fingerprint_all(findings: list[Finding], root: str | None = None) -> None:
    """Line-independent fingerprints: rule, file, module, op and the occurrence among equals.

    The file is named relative to ``root`` (the project's settings file directory; default
    the working directory), so that a baseline holds wherever the scan is started from.
    """
    seen: dict[tuple, int] = {}
    for f in findings:
        model = f.model[len(f.path):] if f.model.startswith(f.path) else f.model
        key = (f.rule, stable_path(f.path, root), model, f.module, f.op or "")
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        raw = "\x1f".join(map(str, (*key, occurrence)))
        f.fingerprint = hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def stable_path(path: str, root: str | None = None) -> str:
    """``path`` as the same string however it was named (./m.py, m.py, /abs/m.py): relative
    to ``root`` (default: the working directory) when inside it, with / separators, so that a
    baseline written by ``scan .`` in CI matches the file names pre-commit passes."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full, os.path.abspath(root or os.curdir))
    outside = rel == os.pardir or rel.startswith(os.pardir + os.sep)
    return (full if outside else rel).replace(os.sep, "/")


def sort_key(f: Finding):
    return (SEVERITY_RANK[f.severity], f.path, f.line or 0, f.rule, f.node or "")


def summary(findings: list[Finding]) -> dict:
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        counts[f.severity] += 1
    return counts


def rule_counts(findings: list[Finding]) -> list[dict]:
    """``scan --statistics``: [{rule, name, count}], most frequent first, then by rule id."""
    counts: dict[tuple, int] = {}
    for f in findings:
        counts[(f.rule, f.name)] = counts.get((f.rule, f.name), 0) + 1
    return [{"rule": rule, "name": name, "count": n}
            for (rule, name), n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
