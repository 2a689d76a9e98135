"""What ``precisionaudit scan`` prints: a progress line, each model's result as it finishes
(text), errors on stderr as they happen, then the report of a ``core.report.ScanReport`` in
the chosen format, and the exit code. The scan itself is the scan manager's (scanner.py)."""
from __future__ import annotations

import click

from ..core.errors import UsageError
from ..core.exits import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, debug_requested
from ..core.findings import rule_counts
from ..core.outputs import checked_output
from ..core.report import ScanReport
from . import FORMATTERS, json_report
from . import text as text_report
from .console import Output, Progress, color_enabled
from .words import plural


def check_format(fmt: str, statistics: bool) -> None:
    """Refuse a format the options do not allow, before any model is scanned."""
    if statistics and fmt not in ("text", "json"):
        raise UsageError("--statistics shows text or json")
    if fmt == "html":
        from .html import require_plotly

        require_plotly()


class ScanPrinter:
    """Where the report goes, checked before the scan (never onto a file the scan reads), and
    what is printed as each model finishes. ``manager`` is the scan's ``scanner.ScanManager``."""

    def __init__(self, manager, fmt: str, statistics: bool, color: str, output_file: str | None,
                 write_baseline: str | None):
        self.manager, self.fmt, self.statistics = manager, fmt, statistics
        self.debug = debug_requested()  # --debug: tracebacks of failed models
        self.write_baseline = write_baseline
        read = manager.read
        self.baseline_path = checked_output(write_baseline, read, "baseline") if write_baseline else None
        self.colored = color_enabled(color, to_file=output_file is not None)
        self.out = Output(output_file and checked_output(output_file, [*read, *manager.baselines.paths], "report"),
                          self.colored)
        self.streamed = fmt == "text" and not statistics
        self.progress = Progress(len(manager.files))

    def before(self, index: int, path: str) -> None:
        self.progress.update(index, path)

    def finished(self, outcome) -> None:
        self.progress.clear()
        result = outcome.result
        if result.status == "error":  # on stderr as it happens; stdout stays the report
            if self.debug and result.traceback is not None:
                click.echo(result.traceback, err=True, nl=False)
            click.echo(f"precisionaudit: error: {result.error}", err=True)
        elif self.streamed:
            self.out.write(text_report.render_model(result, outcome.new, self.manager.target, len(outcome.known),
                                                    self.colored))

    def finish(self, report: ScanReport, exit_zero: bool = False) -> int:
        """Write the report and say what the exit code is."""
        if not report.results:
            click.echo(f"precisionaudit: nothing to scan: {plural(len(self.manager.skipped), 'file')} without "
                       f"{self.manager.entry}() skipped", err=True)
            self.out.write(FORMATTERS[self.fmt](report))
            self.out.close()
            return EXIT_OK
        failed, hidden = report.failed, report.hidden
        if self.write_baseline and not failed:
            click.echo(f"precisionaudit: wrote {plural(len(hidden), 'finding')} to {self.write_baseline}", err=True)
        if len(failed) < len(report.results):  # when every model failed there is no report, only the errors
            self.out.write(self._rendered(report))
        self.out.close()
        if hidden and not self.write_baseline and not self.streamed:
            click.echo(f"precisionaudit: {plural(len(hidden), 'finding')} hidden by baseline "
                       f"{report.baseline_shown}", err=True)
        if failed:
            return EXIT_USAGE
        return EXIT_FINDINGS if report.failing and not exit_zero else EXIT_OK

    def _rendered(self, report: ScanReport) -> str:
        if self.statistics:
            counts = rule_counts(report.findings)
            return text_report.render_statistics(counts, self.colored) if self.fmt == "text" \
                else json_report.dumps(counts)
        if self.streamed:
            return text_report.render_summary(report.results, report.findings, report.target, report.elapsed,
                                              len(report.hidden), report.baseline_shown, self.colored)
        return FORMATTERS[self.fmt](report)
