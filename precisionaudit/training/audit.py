"""The training stage's entry point: one file (script or config) -> findings of the
training rules that were selected."""
from __future__ import annotations

import ast

from .findings import training_finding
from .registry import CHECKS, MAX_LINES, MENTIONS


def audit_file(path: str, rules) -> list:
    """Findings of the ``scope: training`` rules among ``rules`` for the script or config
    at ``path``: a DeepSpeed JSON or accelerate YAML config (``configs.config_kind``) runs
    the checks registered with ``reads="deepspeed"``/``"accelerate"``; any other .json or
    .yaml is skipped (no findings); anything else is read as a Python script.

    The file is parsed, never run; a file that cannot be parsed is a UsageError naming it.
    """
    from . import checks  # noqa: F401 - registers the bundled checks
    from .configs import JSON_SUFFIXES, YAML_SUFFIXES, config_kind, read_config
    from .source import Script, read_text

    chosen = [r for r in rules if r.scope == "training"]
    if not chosen:
        return []
    if path.lower().endswith(JSON_SUFFIXES + YAML_SUFFIXES):
        kind = config_kind(path)
        if kind is None:
            return []
        subject = read_config(path, kind)
    else:
        kind, text = "script", read_text(path)
        if not _worth_parsing(path, text, [(r.id, kind) for r in chosen if (r.id, kind) in CHECKS]):
            return []
        subject = Script(path, text)
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


def _worth_parsing(path: str, text: str, keys) -> bool:
    """False when every check to run says the file's text cannot interest it: parsing a
    large file with LibCST and its metadata costs seconds, and most files of a library
    name no optimizer; a file over MAX_LINES lines is generated code. A skipped file is still
    compiled by CPython's parser (far faster) so that a syntax error is reported as for any
    file; one that does not compile is handed to LibCST, which names the problem."""
    generated = text.count("\n") > MAX_LINES
    if not generated and (not keys or any(key not in MENTIONS or MENTIONS[key](text) for key in keys)):
        return True
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False
