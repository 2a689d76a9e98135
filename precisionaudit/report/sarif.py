"""SARIF 2.1.0, the format GitHub code scanning (and most CI dashboards) ingest."""
from __future__ import annotations

import os
from urllib.parse import quote

from .. import __version__
from ..core.findings import stable_path
from ..core.strict_json import dumps, finite

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT_KEY = "precisionaudit/v1"
#: a rule family's tag (a rule pack's rules are tagged precision)
TAGS = {"PA0": "suppression", "PA1": "precision", "PA2": "performance", "PA3": "measurement"}


def _artifact(path: str) -> dict:
    rel = stable_path(path)
    uri = quote(os.fsencode(rel))  # the file name's own bytes, also when they are not UTF-8
    if os.path.isabs(rel):
        return {"uri": "file://" + uri}
    return {"uri": uri, "uriBaseId": "%SRCROOT%"}


def _rule(rule, dtype: str) -> dict:
    """The rule as SARIF describes it; its default level is its severity for the run's dtype."""
    from ..rules.docs import page_url, render_markdown, render_rule

    level = rule.severity_for(dtype)
    return {"id": rule.id, "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": (rule.doc.get("what") or rule.summary).strip()},
            "help": {"text": render_rule(rule), "markdown": render_markdown(rule)},
            **({"helpUri": page_url(rule.id)} if page_url(rule.id) else {}),
            "defaultConfiguration": {"level": LEVELS[level]},
            "properties": {"tags": [TAGS.get(rule.id[:3], "precision")]}}


def _result(f, index: dict) -> dict:
    location = {"physicalLocation": {"artifactLocation": _artifact(f.path)}}
    if f.line:
        location["physicalLocation"]["region"] = {"startLine": f.line, **(
            {"startColumn": f.column} if f.column else {})}
    logical = [{"name": f.module.rsplit(".", 1)[-1] or "<root>",
                "fullyQualifiedName": f.module or "<root>", "kind": "module"}]
    if f.node:
        logical.append({"name": f.node, "fullyQualifiedName": f"{f.module or '<root>'}:{f.node}"})
    location["logicalLocations"] = logical
    result = {"ruleId": f.rule, "level": LEVELS[f.severity],
              "message": {"text": f"{f.message} [{f.module or '<root>'} · {f.op}]" if f.op else f.message},
              "locations": [location],
              "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
              "properties": finite({"model": f.model, "module": f.module, "node": f.node,
                                     "op": f.op, "evidence": f.evidence, "fix": f.fix})}
    if f.rule in index:
        result["ruleIndex"] = index[f.rule]
    return result


def report(results, findings, target, rules=None) -> dict:
    if rules is None:
        from ..rules.engine import load_rules

        rules = load_rules()
    index = {r.id: i for i, r in enumerate(rules)}
    errors = [r for r in results if r.status == "error"]
    notifications = [{"level": "error", "message": {"text": r.error or "could not be scanned"},
                      "locations": [{"physicalLocation": {"artifactLocation": _artifact(r.path)}}]}
                     for r in errors]
    root = os.path.abspath(os.getcwd()).replace(os.sep, "/").rstrip("/") + "/"
    run = {"tool": {"driver": {"name": "precisionaudit", "version": __version__,
                               "semanticVersion": __version__, "rules": [_rule(r, target.dtype) for r in rules]}},
           "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + quote(root)}},
           "invocations": [{"executionSuccessful": not errors,
                            "toolExecutionNotifications": notifications}],
           "results": [_result(f, index) for f in findings],
           "properties": {"target": target.as_dict()}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(scan) -> str:
    """The SARIF log of a ``core.report.ScanReport``; its ``rules`` (None: the bundled ones) are
    what the scan ran, packs' included."""
    return dumps(report(scan.results, scan.findings, scan.target, scan.rules))
