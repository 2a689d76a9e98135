"""The training stage's entry point: one file (script or config) -> findings of the
training rules that were selected."""
from __future__ import annotations

from .findings import training_finding
from .registry import CHECKS


def audit_file(path: str, rules) -> list:
    """Findings of the ``scope: training`` rules among ``rules`` for the script or config
    at ``path``: a DeepSpeed JSON or accelerate YAML config (``configs.config_kind``) runs
    the checks registered with ``reads="deepspeed"``/``"accelerate"``; any other .json or
    .yaml is skipped (no findings); anything else is read as a Python script.

    The file is parsed, never run; a file that cannot be parsed is a UsageError naming it.
    """
    from . import checks  # noqa: F401 - registers the bundled checks
    from .configs import JSON_SUFFIXES, YAML_SUFFIXES, config_kind, read_config
    from .source import read_script

    chosen = [r for r in rules if r.scope == "training"]
    if not chosen:
        return []
    if path.lower().endswith(JSON_SUFFIXES + YAML_SUFFIXES):
        kind = config_kind(path)
        if kind is None:
            return []
        subject = read_config(path, kind)
    else:
        kind, subject = "script", read_script(path)
    findings = []
    for rule in chosen:
        check = CHECKS.get((rule.id, kind))
        if check is not None:
            findings += [training_finding(rule, path, hit) for hit in check(subject)]
    return findings


def audit_files(paths, rules) -> tuple[list, list[str]]:
    """(findings, error lines) over ``paths``: a file that cannot be read or parsed is one
    error line naming it, and the other files are still audited."""
    from ..core.errors import UsageError

    findings, errors = [], []
    for path in paths:
        try:
            findings += audit_file(path, rules)
        except UsageError as exc:
            errors.append(str(exc))
    return findings, errors
