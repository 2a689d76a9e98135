"""The rule engine: load the declarative rule packs, select rules, run them over a graph."""
from __future__ import annotations

import os
import pathlib
import string
from dataclasses import dataclass, field
from importlib import resources

import yaml

from ..core.errors import UsageError
from ..core.findings import SEVERITIES, Finding

REQUIRED = ("id", "name", "summary", "severity", "message", "doc")


@dataclass
class Rule:
    id: str
    name: str
    summary: str
    severity: dict  # {"float16": "error", "bfloat16": "warning"}
    message: str
    doc: dict
    match: dict = field(default_factory=dict)
    check: str | None = None
    scope: str = "node"
    needs_inputs: bool = True
    modes: tuple = ("autocast", "pure")
    fix: dict = field(default_factory=dict)
    severity_note: str | None = None  # when a check adjusts the severity: say how
    source: str = ""

    def severity_for(self, dtype: str) -> str:
        return self.severity.get(dtype, self.severity.get("default", "warning"))


def _parse(data: dict, source: str, checks: bool = True) -> Rule:
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise UsageError(f"{source}: rule is missing {', '.join(missing)}")
    severity = data["severity"]
    if isinstance(severity, str):
        severity = {"default": severity}
    for value in severity.values():
        if value not in SEVERITIES:
            raise UsageError(f"{source}: unknown severity {value!r}")
    check = data.get("check")
    if checks and check and check not in _checks():
        raise UsageError(f"{source}: check {check!r} is not a registered Python check")
    known = set(Rule.__dataclass_fields__) - {"source"}
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"{source}: unknown keys {', '.join(sorted(unknown))}")
    fields = dict(data, severity=severity, source=source)
    if "modes" in fields:
        fields["modes"] = tuple(fields["modes"])
    return Rule(**fields)


def _checks() -> dict:
    """The registered Python checks; imported on first use because they import torch."""
    from .checks import CHECKS

    return CHECKS


#: the rule pack in a source checkout / editable install (a wheel ships it as precisionaudit._rules)
_SOURCE_PACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "rules")


def _bundled_pack():
    try:
        return resources.files("precisionaudit._rules")
    except ModuleNotFoundError:
        return pathlib.Path(_SOURCE_PACK)


def _documents(directory: str | None):
    """(file name, parsed YAML) for every rule file of the pack, in name order."""
    pack = pathlib.Path(directory) if directory else _bundled_pack()
    for f in sorted(pack.iterdir(), key=lambda f: f.name):
        if f.name.endswith((".yaml", ".yml")):
            try:
                yield f.name, yaml.safe_load(f.read_text())
            except yaml.YAMLError as exc:
                raise UsageError(f"{f.name}: invalid YAML: {exc}") from exc


def load_rules(directory: str | None = None, checks: bool = True) -> list[Rule]:
    """Every rule of the bundled pack (or of ``directory``), sorted by id.

    ``checks=False`` skips resolving the Python checks (which import torch): for commands
    that only show the catalog (``precisionaudit rules``, docs).
    """
    rules = [_parse(data, source, checks) for source, data in _documents(directory)]
    ids = [r.id for r in rules]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise UsageError(f"duplicate rule ids: {', '.join(sorted(duplicated))}")
    return sorted(rules, key=lambda r: r.id)


def rule_ids(directory: str | None = None) -> list[str]:
    """The catalog's ids without importing torch (config validation runs before any model)."""
    return sorted(data["id"] for _, data in _documents(directory)
                  if isinstance(data, dict) and "id" in data)


def _matches(rule: Rule, node: dict) -> bool:
    ops = rule.match.get("ops")
    if ops and node["op"] not in ops:
        return False
    return all(node.get(k) == v for k, v in rule.match.get("where", {}).items())


class _Template(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def _format(template: str, values: dict) -> str:
    return string.Formatter().vformat(template, (), _Template(values)).strip()


def run_rules(graph, rules: list[Rule], target, path: str, model: str) -> list[Finding]:
    structure_only = graph.graph.get("structure_only", False)
    checks = _checks()
    findings = []
    for rule in rules:
        if rule.scope == "source":  # produced from the source text (suppressions.py), not the graph
            continue
        if target.mode not in rule.modes or (structure_only and rule.needs_inputs):
            continue
        hits = []
        if rule.scope == "graph":
            hits = checks[rule.check](graph, target)
        else:
            for name, node in graph.nodes(data=True):
                if not _matches(rule, node):
                    continue
                evidence = checks[rule.check](graph, name, node, target) if rule.check else {}
                if evidence is not None and evidence is not False:
                    hits.append((name, evidence))
        for name, evidence in hits:
            findings.append(_finding(rule, graph, name, dict(evidence), target, path, model))
    return findings


def _finding(rule, graph, name, evidence, target, path, model) -> Finding:
    node = graph.nodes[name] if name is not None else {}
    severity = evidence.pop("severity", None) or rule.severity_for(target.dtype)
    module = evidence.pop("module", node.get("module", ""))
    column = None if "line" in evidence else node.get("column")  # a check's own line has none
    line = evidence.pop("line", node.get("line"))
    dtype = node.get("compute_dtype") or target.dtype
    values = {**node, "dtype": dtype, "target_dtype": target.dtype, "module": module or "<root>",
              **evidence}
    fix = {k: _format_value(v, values) for k, v in rule.fix.items()}
    if "fix_ops" in evidence:  # the check knows the whole chain that must move to fp32
        fix["ops"] = evidence.pop("fix_ops")
    if fix:
        fix.setdefault("module", module)
    file = node.get("file")
    evidence = {"dtype": dtype, **evidence}
    if file and line and not _same_file(file, path):
        # the op is in library code (transformers, ...): the finding stays on the model file
        evidence["source"] = f"{file}:{line}"
        line = column = None
    return Finding(rule=rule.id, name=rule.name, severity=severity, path=path, line=line, column=column,
                   model=model, node=name, op=node.get("op"), module=module,
                   message=_format(rule.message, values), evidence=evidence, fix=fix)


def _format_value(value, values):
    if isinstance(value, str):
        return _format(value, values)
    if isinstance(value, list):
        return [_format_value(v, values) for v in value]
    return value


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
