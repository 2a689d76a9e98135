"""What a project's settings do to a scan's findings (policy only: the scan manager,
scanner.py, runs the scan and calls ``apply_settings``), in a fixed order: per-rule severity,
per-file-ignores, suppression comments (and PA001 for the unused ones), config patterns.

Fingerprints are computed first, relative to the settings file's directory (the project
root), and before anything is dropped, so that suppressing one of two equal findings does not
change the other's fingerprint (and its baseline entry).
"""
from __future__ import annotations

from ..core.findings import fingerprint_all, sort_key
from .config import Config, expand_codes, path_matches
from .suppressions import suppress_inline, suppress_patterns, unused_findings

UNUSED_SUPPRESSION = "PA001"


def apply_settings(findings, results, rules, known_ids, config: Config, target):
    """The findings a project wants to see (the baseline is applied after, by the caller).

    ``findings`` are fingerprinted relative to ``config.root`` before anything is dropped
    (see the module doc): the scan manager does it.
    """
    ignored = {}

    def ignored_for(path):
        if path not in ignored:
            ignored[path] = expand_codes(config.ignored_for(path), known_ids)
        return ignored[path]

    for f in findings:
        f.severity = config.severity.get(f.rule, f.severity)
    findings = [f for f in findings if f.rule not in ignored_for(f.path)]
    scanned = {r.path: r for r in results if r.status == "ok"}
    findings, directives = suppress_inline(findings, scanned)
    unused_rule = next((r for r in rules if r.id == UNUSED_SUPPRESSION), None)
    if unused_rule is not None:
        def active(path):
            structure_only = scanned[path].frontend == "structure"
            ran = scanned[path].scopes  # a rule of a scope that did not read the file cannot judge it
            return {r.id for r in rules if target.mode in r.modes and (ran is None or r.scope in ran)
                    and not (structure_only and r.needs_inputs and r.scope != "source")} - ignored_for(path)

        models = {path: f"{path}:{r.entry}" for path, r in scanned.items()}
        unused = unused_findings(directives, unused_rule, set(known_ids), active, models)
        fingerprint_all(unused, config.root)
        for f in unused:
            f.severity = config.severity.get(f.rule, f.severity)
        findings += unused
    findings = suppress_patterns(findings, config.suppress,
                                 lambda pattern, path: path_matches(pattern, path, config.root))
    return sorted(findings, key=sort_key)
