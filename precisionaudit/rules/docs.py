"""Rule documentation pages (``precisionaudit rules [ID]``, docs/rules/PAxxx.md), ruff-style."""
from __future__ import annotations

import json
import shutil
import textwrap

#: where docs/ of this repository is published; each rule's page is ``rules/<ID>.md`` below it
#: (SARIF ``helpUri``, ``rules ID``, the text report's links).
DOCS_URL = "https://github.com/OWNER/precisionaudit/blob/main/docs"


def rule_url(rule_id: str) -> str:
    return f"{DOCS_URL}/rules/{rule_id}.md"


def page_url(rule_id: str) -> str | None:
    """The published page of a bundled rule; a rule pack's rules have none there."""
    from .engine import bundled_ids

    return rule_url(rule_id) if rule_id in bundled_ids() else None


def _severity(rule) -> str:
    """'warning; info when fewer than 64 elements are reduced': worded from the rule's data."""
    base = ", ".join(v if k == "default" else f"{v} ({k})" for k, v in rule.severity.items())
    return "; ".join([base, *(f"{c['severity']} when {rule.when(name)}"
                              for name, c in rule.severity_cases.items())])


#: the catalog's severity column wraps past this; the summary takes what the terminal has left
SEVERITY_COLUMN, SEVERITY_COLUMN_MIN = 24, 12
SUMMARY_COLUMN_MIN = 30
NAME_COLUMN_MIN = 16


def render_catalog(rules, width: int | None = None) -> str:
    """The catalog as a table that fits ``width`` columns (the terminal's, 100 when not a
    terminal): the severity and summary cells wrap. ``rules ID`` and ``--format json`` keep
    the full texts on one line."""
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    rows = [("id", "name", "default", "summary")] + [(r.id, r.name, _severity(r), r.summary) for r in rules]
    longest = [max(len(row[i]) for row in rows) for i in range(4)]
    # a long name (low-precision-params-with-scaler) wraps at its hyphens before the
    # severity and summary columns go below their minimum
    name = max(NAME_COLUMN_MIN, min(longest[1], width - longest[0] - 6 - SEVERITY_COLUMN_MIN - SUMMARY_COLUMN_MIN))
    spare = width - longest[0] - name - 6  # what the severity and summary columns share
    severity = max(SEVERITY_COLUMN_MIN, min(longest[2], max(SEVERITY_COLUMN, spare - longest[3]),
                                            spare - SUMMARY_COLUMN_MIN))
    widths = [longest[0], name, severity, max(SUMMARY_COLUMN_MIN, spare - severity)]
    lines = []
    for row in rows:
        cells = [[row[0]], textwrap.wrap(row[1], name, break_on_hyphens=True)] + [
            textwrap.wrap(c, w, break_on_hyphens=False) or [""] for c, w in zip(row[2:], widths[2:])]
        for i in range(max(map(len, cells))):
            parts = [cell[i] if i < len(cell) else "" for cell in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths)).rstrip())
    return "\n".join(lines) + "\n"


#: a rule page's sections: (title, the YAML doc key, shown as code). Notes (the kernel
#: sources and hardware facts behind the rule) come last: a reader wants the fix first.
SECTIONS = (("What it does", "what", False), ("Why is this bad?", "why", False),
            ("Example", "bad", True), ("Use instead", "good", True), ("Notes", "notes", False))


def render_rule(rule) -> str:
    doc = rule.doc
    parts = [f"{rule.id} {rule.name}", "", f"Default severity: {_severity(rule)}"]
    if not rule.needs_inputs:
        parts.append("Runs without example inputs (module structure).")
    if tuple(rule.modes) != ("autocast", "pure"):
        parts.append(f"Applies in mode: {', '.join(rule.modes)}")
    if rule.targets:
        parts.append(f"Applies under --dtype: {', '.join(rule.targets)}")
    for title, key, _ in SECTIONS:
        if doc.get(key):
            parts += ["", f"## {title}", doc[key].rstrip()]
    if page_url(rule.id):
        parts += ["", f"Docs: {page_url(rule.id)}"]
    return "\n".join(parts) + "\n"


def render_markdown(rule, page: bool = False) -> str:
    """The rule's documentation as Markdown: SARIF's ``help.markdown``, and with ``page``
    the whole docs/rules/<ID>.md (title, severity, when it applies)."""
    doc = rule.doc
    if page:
        parts = [f"# {rule.id} {rule.name}", rule.summary[0].upper() + rule.summary[1:] + ".",
                 f"Default severity: {_severity(rule)}." + (
                     "" if rule.needs_inputs else " Runs without example inputs (module structure).")
                 + ("" if tuple(rule.modes) == ("autocast", "pure")
                    else f" Applies in mode: {', '.join(rule.modes)}.")
                 + (f" Applies under `--dtype {' / '.join(rule.targets)}`." if rule.targets else "")]
    else:
        parts = [f"**{rule.id} {rule.name}**: {rule.summary}"]
    for title, key, code in SECTIONS:
        if doc.get(key):
            body = doc[key].rstrip()
            parts.append(f"## {title}\n" + (f"```python\n{body}\n```" if code else body))
    if page:
        parts.append(f"See also: `precisionaudit rules {rule.id}`, the [rule catalog](index.md).")
    return "\n\n".join(parts) + ("\n" if page else "")


def markdown_pages(rules) -> dict[str, str]:
    """{path below docs/: text}: docs/rules/<ID>.md for every rule, and the catalog."""
    pages = {f"rules/{r.id}.md": render_markdown(r, page=True) for r in rules}
    rows = ["| id | name | default severity | fires when |", "|---|---|---|---|"]
    rows += [f"| [{r.id}]({r.id}.md) | {r.name} | {_severity(r)} | {r.summary.replace('|', '/')} |"
             for r in rules]
    pages["rules/index.md"] = (
        "# Rule catalog\n\nRule ids are stable: new rules get new ids, none is renumbered. "
        "PA0xx are about precisionaudit itself, PA1xx precision hazards (values that overflow, "
        "underflow or lose their precision), PA2xx Tensor Core performance hints (never "
        "errors), PA3xx hazards in measured values (calibration data, real weights: `--data`, "
        "`--weights`), PA7xx what `precisionaudit.watch` found inside a training job (`precisionaudit "
        "watch DIR`). `precisionaudit rules ID` shows a page in the terminal.\n\n" + "\n".join(rows) + "\n")
    return pages


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
            "targets": list(rule.targets),
            "doc": {k: v.rstrip() for k, v in rule.doc.items() if isinstance(v, str)}}


def render_json(rules, one: bool) -> str:
    records = [rule_record(r) for r in rules]
    return json.dumps(records[0] if one else records, indent=2) + "\n"
