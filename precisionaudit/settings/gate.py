"""The scan gate, one model at a time: each file judged under the settings that apply to it
(``resolve``), the findings its baseline records set aside, and whether it fails the gate.

One outcome per model as it finishes, so that the report can be printed as the scan goes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.findings import SEVERITY_RANK
from ..core.values import NO_VALUES
from ..rules.sites import cap_per_rule
from .apply import scan_with_settings
from .baseline import read_baseline, split_known
from .resolve import FileSettings, SettingsResolver


@dataclass
class Outcome:
    result: object  # scanner.ModelResult
    new: list  # findings to report
    known: list  # findings the baseline records (or all of them, when writing a baseline)
    settings: FileSettings

    @property
    def failing(self) -> bool:
        """A new finding at or above the ``fail-on`` of this model's settings."""
        threshold = SEVERITY_RANK[self.settings.fail_on]
        return any(SEVERITY_RANK[f.severity] <= threshold for f in self.new)


class Baselines:
    """The fingerprints of every baseline file in force, read before the first model loads
    (a bad baseline is reported at once, not after minutes of scanning). ``recording``
    (``--write-baseline``): every finding is taken as known, and no file is read."""

    def __init__(self, given: str | None = None, recording: bool = False):
        """``given``: the command line's --baseline, read at once (before the files are listed)."""
        self.recording = recording
        self._known: dict[str, set] = {}
        self._read(given)

    def read_for(self, resolver: SettingsResolver, files) -> None:
        """Read the baseline each settings file names (every settings file is checked here)."""
        for settings, _ in resolver.groups(files):
            self._read(settings.baseline)

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


def outcomes(files, resolver: SettingsResolver, rules, known_ids, entry, inputs, baselines: Baselines,
             before=None, timeout=None, values=NO_VALUES):
    """An ``Outcome`` per model file, as each finishes; ``before(index, path)`` is called
    before each file is loaded (a progress line); ``timeout``: seconds each model may take."""
    for index, path in enumerate(files, 1):
        if before is not None:
            before(index, path)
        settings = resolver.for_path(path)
        chosen = [r for r in rules if r.id in settings.rule_ids]
        (result,), found = scan_with_settings([path], settings.target, chosen, known_ids,
                                              settings.config, entry, inputs, timeout, values)
        new, known = baselines.split(found, settings.baseline)
        yield Outcome(result, cap_per_rule(new), known, settings)
