"""What a scan hands every formatter: one object, so that the text, JSON, SARIF, GitHub and
HTML reports read the same facts the same way."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScanReport:
    results: list  # core.results.ModelResult, one per file, in the order scanned
    findings: list  # core.findings.Finding to report (after settings, baseline and cap)
    target: object  # core.target.Target: the report's top-level target
    rules: list | None = None  # the rule catalog the scan ran, packs' included (None: the bundled)
    hidden: list = field(default_factory=list)  # findings a baseline records
    elapsed: float | None = None  # seconds
    baselines: list = field(default_factory=list)  # the baseline files read
    failing: bool = False  # a new finding at or above some file's fail-on
    settings: list | None = None  # the settings in force (JSON's "settings"), per settings file
    baseline_shown: str = ""  # how the summary names the baseline(s)

    @property
    def failed(self) -> list:
        return [r for r in self.results if r.status == "error"]
