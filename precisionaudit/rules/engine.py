"""The rule engine: load the declarative rule packs, select rules, run them over a graph.

A rule pack is a directory of rule YAML files: the bundled one, those installed packages
name in the entry point group ``precisionaudit.rules`` (a directory, or a function that
returns one; importing the package may register Python checks with ``checks.check``),
and those a settings file names in ``rule-packs``.
"""
from __future__ import annotations

import functools
import os
import pathlib
import string
from dataclasses import dataclass, field
from importlib import resources

import yaml

from ..analysis.facts import RECORDS, fact, flat, path_error
from ..core.errors import UsageError
from ..core.findings import Finding
from ..core.schema import schema_error
from .registry import CHECKS, Hit, param, running_rule  # noqa: F401  (param: packs once read engine.param)
from .schema import RULE_SCHEMA

ENTRY_POINT_GROUP = "precisionaudit.rules"
#: libyaml's safe loader where PyYAML was built with it (several times faster), else PyYAML's
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    targets: tuple = ()  # the --dtype targets it judges (Target.named_dtype); empty: every one
    fix: dict = field(default_factory=dict)
    severity_cases: dict = field(default_factory=dict)  # case a check reports → severity, when
    params: dict = field(default_factory=dict)  # thresholds its check reads (``param``)
    source: str = ""
    bundled: bool = False  # ships with precisionaudit: its templates are formatted strictly

    def severity_for(self, dtype: str, case: str | None = None) -> str:
        if case is not None:
            return self.severity_cases[case]["severity"]
        return self.severity.get(dtype, self.severity.get("default", "warning"))

    def when(self, case: str) -> str:
        """When ``case`` applies, in words, its thresholds filled in from ``params``."""
        return self.severity_cases[case]["when"].format(**self.params)


def _parse(data, source: str, checks: bool = True) -> Rule:
    error = None if source in _BUNDLED_SOURCES else schema_error(data, RULE_SCHEMA)
    if error:
        where, why = error
        raise UsageError(f"{source}: {where + ': ' if where else ''}{why}")
    for key in (data.get("match") or {}).get("where") or {}:
        if path_error(key):
            raise UsageError(f"{source}: match.where: {path_error(key)}")
    check = data.get("check")
    # a bundled rule's check is held to the registry by the test suite: resolving it would
    # import every model check (networkx, ...), which a scan of training scripts never runs
    if checks and check and source not in _BUNDLED_SOURCES and check not in _checks():
        raise UsageError(f"{source}: check {check!r} is not a registered Python check")
    fields = dict(data, source=source, bundled=source in _BUNDLED_SOURCES)
    if isinstance(fields["severity"], str):
        fields["severity"] = {"default": fields["severity"]}
    for key in ("modes", "targets"):
        if key in fields:
            fields[key] = tuple(fields[key])
    rule = Rule(**fields)
    for case in rule.severity_cases:
        try:
            rule.when(case)
        except (KeyError, IndexError, ValueError) as exc:
            raise UsageError(f"{source}: severity_cases.{case}.when: names no param ({exc})") from exc
    return rule


def _checks() -> dict:
    """The registered Python checks; the bundled ones are imported on first use because
    they import torch."""
    from . import checks  # noqa: F401  (registers the bundled checks)

    return CHECKS


#: the rule pack in a source checkout / editable install (a wheel ships it as precisionaudit._rules)
_SOURCE_PACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "rules")


def _bundled_pack():
    try:
        return resources.files("precisionaudit._rules")
    except ModuleNotFoundError:
        return pathlib.Path(_SOURCE_PACK)


def _documents(pack=None):
    """(source, parsed YAML) for every rule file of ``pack`` (default: the bundled one), in
    name order; the source is the file name for the bundled pack, the path for others."""
    directory = pathlib.Path(pack) if pack else _bundled_pack()
    if pack and not directory.is_dir():
        raise UsageError(f"{pack}: no such rule pack directory")
    for f in sorted(directory.iterdir(), key=lambda f: f.name):
        if f.name.endswith((".yaml", ".yml")):
            source = str(f) if pack else f.name
            if not pack:
                _BUNDLED_SOURCES.add(source)
            try:
                yield source, yaml.load(f.read_text(), Loader=_LOADER)
            except yaml.YAMLError as exc:
                raise UsageError(f"{source}: invalid YAML: {exc}") from exc


def installed_packs() -> list[str]:
    """The rule pack directories installed packages name in the ``precisionaudit.rules`` group."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = ep.load()
            directory = os.fspath(target() if callable(target) else target)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is one line, not a traceback
            raise UsageError(f"rule pack {ep.name!r} ({ep.value}) could not be loaded: "
                             f"{type(exc).__name__}: {exc}") from exc
        if not os.path.isdir(directory):
            raise UsageError(f"rule pack {ep.name!r} ({ep.value}): {directory} is not a directory")
        found.append(directory)
    return found


#: sources of the bundled pack's rules: the test suite holds them to the schema, so a
#: command that reads only them does not pay for importing jsonschema
_BUNDLED_SOURCES: set = set()


def _all_documents(directory, packs):
    for pack in [directory, *installed_packs(), *packs]:
        yield from _documents(pack)


def load_rules(directory: str | None = None, checks: bool = True, packs=()) -> list[Rule]:
    """Every rule of the bundled pack (or of ``directory`` instead), of the installed packs
    and of the pack directories ``packs``, sorted by id.

    ``checks=False`` skips resolving the Python checks (which import torch): for commands
    that only show the catalog (``precisionaudit rules``, docs).
    """
    rules = [_parse(data, source, checks) for source, data in _all_documents(directory, packs)]
    ids = [r.id for r in rules]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise UsageError(f"duplicate rule ids: {', '.join(sorted(duplicated))}")
    return sorted(rules, key=lambda r: r.id)


def rule_ids(directory: str | None = None, packs=()) -> list[str]:
    """The catalog's ids without importing torch (config validation runs before any model)."""
    return sorted(data["id"] for _, data in _all_documents(directory, packs)
                  if isinstance(data, dict) and "id" in data)


@functools.cache
def bundled_ids() -> frozenset:
    """The ids of the rules that ship with precisionaudit: those with a page in docs/rules."""
    return frozenset(rule_ids())


def _matches(rule: Rule, node: dict) -> bool:
    """The node's op is one of ``match.ops`` and every ``match.where`` fact has its value: a
    key is an OpNode field, ``record.field`` (analysis/facts.py) or an old flat fact key."""
    ops = rule.match.get("ops")
    if ops and node["op"] not in ops:
        return False
    return all(fact(node, k) == v for k, v in rule.match.get("where", {}).items())


def _node_values(node) -> dict:
    """What a message may name of a node: its OpNode fields and the passes' facts under their
    old flat names (``{why}``, ``{reduced_extent}``), not the records themselves."""
    return {**{k: v for k, v in node.items() if k not in RECORDS}, **flat(node)}


class _Lenient(dict):
    """A rule pack's placeholder that nothing supplies stays as written: ``{name}``."""

    def __missing__(self, key):
        return "{" + key + "}"


class TemplateError(Exception):
    """A bundled rule's message or fix names a placeholder that no value supplies: a bug."""


def format_template(rule: Rule, template: str, values: dict) -> str:
    """``template`` (a rule's message or fix text) filled from ``values``; strict for bundled
    rules (an unknown placeholder is a TemplateError), lenient for packs."""
    if not rule.bundled:
        values = _Lenient(values)
    try:
        return string.Formatter().vformat(template, (), values).strip()
    except KeyError as exc:
        raise TemplateError(f"{rule.source}: {template!r} names {{{exc.args[0]}}}, which neither the "
                            "node nor the check supplies") from None


#: the scopes whose rules run on the IR; ``source``, ``training``, ``measurement`` and
#: ``watch`` rules are produced elsewhere (suppressions, the training stage, check --train,
#: the watch log)
GRAPH_SCOPES = ("node", "graph")


def run_rules(graph, rules: list[Rule], target, path: str, model: str) -> list[Finding]:
    structure_only = graph.graph.get("structure_only", False)
    checks = _checks()
    findings = []
    for rule in rules:
        if rule.scope not in GRAPH_SCOPES:  # from source text (suppressions.py, training/)
            continue  # or from training runs (check --train)
        if target.mode not in rule.modes or (structure_only and rule.needs_inputs):
            continue
        if rule.targets and target.named_dtype not in rule.targets:
            continue
        token = running_rule.set(rule)
        try:
            hits = _hits(rule, graph, checks, target)
        finally:
            running_rule.reset(token)
        findings += [_finding(rule, graph, hit, target, path, model) for hit in hits]
    return findings


def _hits(rule, graph, checks, target) -> list[Hit]:
    """Every place ``rule`` fires."""
    if rule.scope == "graph":
        return [_as_hit(found) for found in checks[rule.check](graph, target)]
    hits = []
    for name, node in graph.nodes(data=True):
        if not _matches(rule, node):
            continue
        found = checks[rule.check](graph, name, node, target) if rule.check else Hit(name)
        if found is not None and found is not False:
            hits.append(_as_hit(found, name))
    return hits


def _as_hit(found, name=None) -> Hit:
    """A check's result as a Hit. A rule pack's check may return the evidence dict (``case``
    in it names its severity case) or, from a graph check, ``(node name, evidence)``."""
    if isinstance(found, Hit):
        return found
    if name is None:
        name, found = found
    values = dict(found)
    return Hit(name, values, case=values.pop("case", None))


def _finding(rule, graph, hit: Hit, target, path, model) -> Finding:
    node = graph.nodes[hit.node] if hit.node is not None else {}
    if "severity" in hit.values or (hit.case is not None and hit.case not in rule.severity_cases):
        raise UsageError(f"{rule.source}: its check reported severity {hit.values.get('severity', hit.case)!r}: "
                         "checks name a case of the rule's severity_cases, the YAML says its severity")
    severity = rule.severity_for(target.dtype, hit.case)
    module = hit.module if hit.module is not None else node.get("module", "")
    column = None if hit.line is not None else node.get("column")  # a check's own line has none
    line = hit.line if hit.line is not None else node.get("line")
    dtype = node.get("compute_dtype") or target.dtype
    values = {**_node_values(node), "dtype": dtype, "target_dtype": target.dtype, "module": module or "<root>",
              **hit.values}
    fix = {k: _format_value(rule, v, values) for k, v in rule.fix.items()}
    if hit.fix.ops is not None:  # the check knows the whole chain that must move to fp32
        fix["ops"] = list(hit.fix.ops)
    fix.update(hit.fix.instead)
    if hit.fix.whole_modules:
        fix["whole_modules"] = list(hit.fix.whole_modules)
    if fix:
        fix.setdefault("module", module)
    file = node.get("file")
    evidence = {"dtype": dtype, **hit.values}
    if file and line and not _same_file(file, path):
        # the op is in library code (transformers, ...): the finding stays on the model file
        evidence["source"] = f"{file}:{line}"
        line = column = None
    return Finding(rule=rule.id, name=rule.name, severity=severity, path=path, line=line, column=column,
                   model=model, node=hit.node, op=node.get("op"), module=module,
                   message=format_template(rule, rule.message, values), evidence=evidence, fix=fix)


def _format_value(rule, value, values):
    if isinstance(value, str):
        return format_template(rule, value, values)
    if isinstance(value, list):
        return [_format_value(rule, v, values) for v in value]
    return value


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
