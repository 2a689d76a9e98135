"""Rule documentation pages (``precisionaudit rules [ID]``), ruff-style."""


def _severity(rule) -> str:
    if rule.severity_note:
        return rule.severity_note
    return ", ".join(v if k == "default" else f"{v} ({k})" for k, v in rule.severity.items())


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
