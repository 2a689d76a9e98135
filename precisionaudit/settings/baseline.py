"""Baselines: record today's findings so that a gate fails only on new ones.

Findings are matched by fingerprint (rule, file, model, module, op and the occurrence
among equal ones; never the line), so edits above a known finding do not resurface it. The
file keeps each finding's rule, place and message too, so that a reviewer can read what a
commit accepts.
"""
from __future__ import annotations

import json

from .. import __version__
from ..core.atomic import write_text_atomic
from ..core.documents import reading, require_regular_file
from ..core.errors import UsageError
from ..core.findings import Finding, stable_path
from ..core.schema import schema_error

FORMAT = 1
_NOT_OURS = "not a precisionaudit baseline (expected findings with fingerprints)"
#: what a baseline file must hold (the rest of each finding is for reviewers)
SCHEMA = {
    "type": "object", "x-message": _NOT_OURS, "required": ["tool", "findings"],
    "properties": {
        "tool": {"const": "precisionaudit", "x-message": _NOT_OURS},
        "findings": {"type": "array", "x-message": _NOT_OURS, "items": {
            "type": "object", "required": ["fingerprint"], "x-message": _NOT_OURS,
            "properties": {"fingerprint": {"type": "string", "x-message": _NOT_OURS}}}},
        "baseline": {"type": "integer", "maximum": FORMAT, "x-message":
                     f"baseline format {{value!r}} is not one this precisionaudit understands ({FORMAT})"},
    },
}
_KEPT = ("rule", "name", "severity", "line", "model", "module", "node", "op", "message")


def write_baseline(path: str, findings: list[Finding], target, root: str | None = None) -> None:
    """Paths are written relative to ``root``, the directory fingerprints are computed from."""
    entries = sorted(({"fingerprint": f.fingerprint, "path": stable_path(f.path, root),
                       **{k: getattr(f, k) for k in _KEPT}} for f in findings),
                     key=lambda e: (e["path"], e["rule"], e["module"], e["fingerprint"]))
    document = {"tool": "precisionaudit", "version": __version__, "baseline": FORMAT,
                "target": target.as_dict(), "findings": entries}
    write_text_atomic(path, json.dumps(document, indent=2) + "\n", "baseline")


def read_baseline(path: str) -> set[str]:
    """The fingerprints a baseline file records."""
    try:
        require_regular_file(path, "baseline")
        with open(path, encoding="utf-8") as fh, reading(path, "baseline"):
            document = json.load(fh)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such baseline file (write one with --write-baseline)") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read baseline: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not a precisionaudit baseline (invalid JSON: {exc})") from exc
    error = schema_error(document, SCHEMA)
    if error is not None:
        raise UsageError(f"{path}: {error[1]}")
    return {e["fingerprint"] for e in document["findings"]}


def split_known(findings: list[Finding], known: set[str]) -> tuple[list[Finding], list[Finding]]:
    """(new findings, findings the baseline already records)."""
    new = [f for f in findings if f.fingerprint not in known]
    return new, [f for f in findings if f.fingerprint in known]


class Baselines:
    """The fingerprints of every baseline file in force, read before the first model loads
    (a bad baseline is reported at once, not after minutes of scanning). ``recording``
    (``--write-baseline``): every finding is taken as known, and no file is read."""

    def __init__(self, given: str | None = None, recording: bool = False):
        """``given``: the command line's --baseline, read at once (before the files are listed)."""
        self.recording = recording
        self._known: dict[str, set] = {}
        self._read(given)

    def read_all(self, paths) -> None:
        """Read the baselines the settings files in force name."""
        for path in paths:
            self._read(path)

    def _read(self, path: str | None) -> None:
        if path and not self.recording and path not in self._known:
            self._known[path] = read_baseline(path)

    @property
    def paths(self) -> list[str]:
        return sorted(self._known)

    def split(self, findings, baseline: str | None):
        if self.recording:
            return [], list(findings)
        return split_known(findings, self._known.get(baseline, set()))
