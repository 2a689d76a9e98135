"""Suppressions: comments on the op's source line, and config patterns for findings without one.

Comments (read with ``tokenize``, so a ``#`` inside a string is not one):
``# precisionaudit: ignore[PA107, PA109]``, ``# precisionaudit: ignore`` (every rule),
``# noqa: PA107`` and a bare ``# noqa`` (every rule, as in ruff). A comment covers its
line and, when that line is part of a simple statement spread over several lines (black's
wrapped calls), the whole statement. Config patterns (``[[tool.precisionaudit.suppress]]``)
match findings by rule and by path glob and module / node / op globs (the plan's dotted
globs, ``core.globs``: ``*`` is one component, ``**`` any number); ONNX nodes and ops inside
library code have no line in the model file to carry a comment.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from ..core.findings import Finding, code_covers
from ..core.globs import matches as glob_matches

_OWN = re.compile(r"#\s*precisionaudit:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_OUR_CODE = re.compile(r"PA[0-9]+$")


@dataclass
class Directive:
    line: int
    text: str  # as written, for the unused-suppression message
    codes: tuple | None  # None: every rule
    own: bool  # precisionaudit: ignore (True) or noqa (False)
    first: int = 0  # first..last: the lines it covers
    last: int = 0
    used: set = field(default_factory=set)

    def covers(self, line: int) -> bool:
        return self.first <= line <= self.last

    def suppresses(self, rule: str) -> bool:
        return self.codes is None or rule in self.codes


def _comments(source: str):
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError):
        return


def _statement_spans(source: str) -> dict[int, tuple[int, int]]:
    """line -> (first, last) line of the simple statement it belongs to, when that spans lines."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    spans = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and node.end_lineno > node.lineno:
            for line in range(node.lineno, node.end_lineno + 1):
                spans[line] = (node.lineno, node.end_lineno)
    return spans


def parse_directives(source: str) -> list[Directive]:
    """Every suppression comment of a source file, with the lines it covers."""
    if not (_OWN.search(source) or _NOQA.search(source)):
        return []  # no comment can be one: spare the tokenizer and the parser (the hook's cost)
    spans = _statement_spans(source)
    found = []
    for line, comment in _comments(source):
        first, last = spans.get(line, (line, line))
        for match in _OWN.finditer(comment):
            codes = [c.strip().upper() for c in re.split(r"[,\s]+", match["codes"] or "") if c.strip()]
            found.append(Directive(line, match[0], tuple(codes) or None, True, first, last))
        for match in _NOQA.finditer(comment):
            codes = re.split(r"[,\s]+", match["codes"].upper()) if match["codes"] else None
            found.append(Directive(line, match[0].strip(), codes and tuple(codes), False, first, last))
    return found


def read_directives(path: str) -> list[Directive]:
    try:
        with tokenize.open(path) as fh:
            return parse_directives(fh.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []


def suppress_inline(findings: list[Finding], paths) -> tuple[list[Finding], dict[str, list[Directive]]]:
    """(findings no comment suppresses, {path: directives}); each directive records in
    ``used`` the rule ids it suppressed."""
    directives = {path: read_directives(path) for path in paths if path.endswith(".py")}
    kept = []
    for f in findings:
        hits = [d for d in directives.get(f.path, ()) if f.line and d.covers(f.line) and d.suppresses(f.rule)]
        for d in hits:
            d.used.add(f.rule)
        if not hits:
            kept.append(f)
    return kept, directives


def unused_findings(directives: dict[str, list[Directive]], rule, known_ids, active_ids, models) -> list[Finding]:
    """PA001 findings for directives that suppressed nothing.

    ``active_ids(path)`` are the rules that ran on the file: a code of a rule that did not
    run (not selected, ignored for the file, not for this mode) cannot be judged unused.
    A bare ``# noqa`` and codes of other linters (E501) are left to those linters.
    """
    found = []
    for path, items in directives.items():
        active = active_ids(path)
        if rule.id not in active:
            continue
        for d in items:
            if d.codes is None:
                unused = [] if (d.used or not d.own) else [None]
            else:
                ours = [c for c in d.codes if d.own or _OUR_CODE.match(c)]
                unknown = [c for c in ours if c not in known_ids]
                unused = unknown + [c for c in ours if c in active and c not in d.used]
            if not unused:
                continue
            found.append(_unused(rule, path, models.get(path, path), d, unused, known_ids))
    return found


def _unused(rule, path, model, d: Directive, unused, known_ids) -> Finding:
    unknown = [c for c in unused if c and c not in known_ids]
    missing = [c for c in unused if c and c in known_ids]
    reasons = []
    if None in unused:
        reasons.append("no finding here")
    if missing:
        reasons.append(f"no {', '.join(missing)} finding here")
    if unknown:
        reasons.append(f"{', '.join(unknown)} {'is not a rule id' if len(unknown) == 1 else 'are not rule ids'}")
    message = rule.message.format(comment=d.text, reason="; ".join(reasons))
    return Finding(rule=rule.id, name=rule.name, severity=rule.severity_for("default"), path=path,
                   line=d.line, model=model, node=None, op=None, module="", message=message,
                   evidence={"comment": d.text, "unused": [c or "*" for c in unused]})


def _glob(pattern: str | None, value: str | None) -> bool:
    return pattern is None or glob_matches(pattern, value)


def suppress_patterns(findings: list[Finding], entries: list[dict], path_matches) -> list[Finding]:
    """Findings that no config ``suppress`` entry matches (all given keys must match)."""
    def matches(f: Finding, e: dict) -> bool:
        return (any(code_covers(c, f.rule) for c in e["rule"])
                and ("path" not in e or path_matches(e["path"], f.path))
                and _glob(e.get("module"), f.module) and _glob(e.get("node"), f.node)
                and _glob(e.get("op"), f.op))

    return [f for f in findings if not any(matches(f, e) for e in entries)]
