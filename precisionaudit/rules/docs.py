"""Rule documentation pages (``precisionaudit rules [ID]``), ruff-style."""
from __future__ import annotations

import json


def _severity(rule) -> str:
    """'warning; info when fewer than 64 elements are reduced': worded from the rule's data."""
    base = ", ".join(v if k == "default" else f"{v} ({k})" for k, v in rule.severity.items())
    return "; ".join([base, *(f"{c['severity']} when {rule.when(name)}"
                              for name, c in rule.severity_cases.items())])


def render_catalog(rules) -> str:
    rows = [("id", "name", "default", "summary")] + [(r.id, r.name, _severity(r), r.summary) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3] + "\n" for row in rows)


def render_rule(rule) -> str:
    doc = rule.doc
    parts = [f"{rule.id} {rule.name}", "", f"Default severity: {_severity(rule)}"]
    if not rule.needs_inputs:
        parts.append("Runs without example inputs (module structure).")
    if tuple(rule.modes) != ("autocast", "pure"):
        parts.append(f"Applies in mode: {', '.join(rule.modes)}")
    for title, key in (("What it does", "what"), ("Why is this bad?", "why"),
                       ("Example", "bad"), ("Use instead", "good")):
        if doc.get(key):
            parts += ["", f"## {title}", doc[key].rstrip()]
    return "\n".join(parts) + "\n"


def select_rules(rules, query: str | None) -> tuple[list, bool]:
    """(rules, one page?) that ``rules [QUERY]`` shows: an exact id or name is one page;
    a prefix (``PA1``) is that family's catalog; nothing is the whole catalog."""
    if query is None:
        return list(rules), False
    exact = [r for r in rules if r.id == query.upper() or r.name == query]
    if exact:
        return exact, True
    return [r for r in rules if r.id.startswith(query.upper())], False


def rule_record(rule) -> dict:
    """One rule as JSON (``rules --format json``): what the catalog and the page show."""
    return {"id": rule.id, "name": rule.name, "summary": rule.summary,
            "severity": dict(rule.severity), "severity_note": _severity(rule),
            "severity_cases": {name: {"severity": c["severity"], "when": rule.when(name)}
                               for name, c in rule.severity_cases.items()},
            "params": dict(rule.params),
            "needs_inputs": rule.needs_inputs, "modes": list(rule.modes),
            "doc": {k: v.rstrip() for k, v in rule.doc.items() if isinstance(v, str)}}


def render_json(rules, one: bool) -> str:
    records = [rule_record(r) for r in rules]
    return json.dumps(records[0] if one else records, indent=2) + "\n"
