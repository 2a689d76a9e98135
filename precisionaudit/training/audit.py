"""The training stage's entry point: one file (script or config) -> findings of the
training rules that were selected."""
from __future__ import annotations

import ast

from .findings import training_finding
from .registry import CHECKS, MENTIONS


def audit_file(path: str, rules) -> list:
    """Findings of the ``scope: training`` rules among ``rules`` for the script at ``path``.

    The file is parsed, never run; a file that cannot be parsed is a UsageError naming it.
    """
    from . import checks  # noqa: F401 - registers the bundled checks
    from .source import read_script

    chosen = [r for r in rules if r.scope == "training"]
    if not chosen:
        return []
    kind = "script"
    if not _worth_parsing(path, [(r.id, kind) for r in chosen if (r.id, kind) in CHECKS]):
        return []
    subject = read_script(path)
    findings = []
    for rule in chosen:
        check = CHECKS.get((rule.id, kind))
        if check is not None:
            findings += [training_finding(rule, path, hit) for hit in check(subject)]
    return findings


def _worth_parsing(path: str, keys) -> bool:
    """False when every check to run says the file's text cannot interest it: parsing a
    large file with LibCST and its metadata costs seconds, and most files of a library
    name no optimizer. A skipped file is still compiled by CPython's parser (far faster)
    so that a syntax error is reported as for any file; an unreadable file, or one that
    does not compile, is handed to read_script, which names the problem."""
    if not keys or any(key not in MENTIONS for key in keys):
        return True
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8")
        if any(MENTIONS[key](text) for key in keys):
            return True
        compile(raw, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False
