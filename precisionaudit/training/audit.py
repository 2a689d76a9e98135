"""The training stage's entry points: a script (``audit_script``) or a parsed config
(``audit_config``) -> the findings of the training rules that were selected.

A script is read with a text prefilter first (each check's ``mentions=``: most files of a
library name no optimizer and no scaler), then parsed once with CPython's ``ast``
(``source.Script``) for every check. Its findings are kept in the content-hash cache
(``cache.py``) when the scan has one: an unchanged file then costs a hash.
"""
from __future__ import annotations

from ..core.errors import UsageError
from .findings import training_finding
from .registry import CHECKS, MAX_LINES, MENTIONS


def audit_script(path: str, rules, cache=None) -> list:
    """Findings of the ``scope: training`` rules among ``rules`` for the Python script at
    ``path``, parsed and never run; a file that cannot be read or parsed is a UsageError
    naming it. ``cache``: a ``cache.Cache`` (None: none)."""
    from . import checks  # noqa: F401 - registers the bundled checks
    from .source import read_text

    chosen = [r for r in rules if r.scope == "training" and (r.id, "script") in CHECKS]
    if not [r for r in rules if r.scope == "training"]:
        return []
    text = read_text(path)
    if cache is None:
        return _audit_text(path, text, chosen)
    key = cache.key(path, text, chosen)
    found = cache.get(key)
    if found is None:
        try:
            found = cache.put(key, _audit_text(path, text, chosen))
        except UsageError as exc:
            cache.put(key, exc)
            raise
    return found


def _audit_text(path: str, text: str, chosen) -> list:
    from .source import NewerSyntax, Script

    try:
        script = Script(path, text)
    except NewerSyntax:
        return []  # valid for a newer Python than this one: not analysed
    return run_checks(script, chosen)


def run_checks(script, rules) -> list:
    """The findings of the script checks of ``rules`` on the parsed ``script``; a check
    whose ``mentions`` says the text cannot interest it is not run. A file of more than
    MAX_LINES lines is generated code, not a training script: none is run."""
    from . import checks  # noqa: F401 - registers the bundled checks

    text = script.text
    if text.count("\n") > MAX_LINES:
        return []
    findings = []
    for rule in rules:
        key = (rule.id, "script")
        if rule.scope != "training" or key not in CHECKS or (key in MENTIONS and not MENTIONS[key](text)):
            continue
        findings += [training_finding(rule, script.path, hit) for hit in CHECKS[key](script)]
    return findings


def audit_config(config, rules) -> list:
    """Findings of the selected training rules that read ``config``'s kind
    (``configs.Config``: a DeepSpeed or accelerate config)."""
    from . import checks  # noqa: F401 - registers the bundled checks

    findings = []
    for rule in rules:
        check = CHECKS.get((rule.id, config.kind)) if rule.scope == "training" else None
        if check is not None:
            findings += [training_finding(rule, config.path, hit) for hit in check(config)]
    return findings


def audit_files(paths, rules, cache=None) -> tuple[list, list[str]]:
    """(findings, error lines) over the scripts ``paths``: a file that cannot be read or
    parsed is one error line naming it, and the other files are still audited."""
    findings, errors = [], []
    for path in paths:
        try:
            findings += audit_script(path, rules, cache)
        except UsageError as exc:
            errors.append(str(exc))
    return findings, errors
