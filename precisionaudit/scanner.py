"""The scan manager (as bandit's manager): which files a scan takes, the settings each file is
judged under, its frontend's scan, then the project's policy over the findings (severity,
ignores, suppressions, PA001), the baseline, the per-rule cap and the order; one ``Outcome``
per file as it finishes, and the ``ScanReport`` every formatter renders.

Paths are expanded once and fingerprints computed once per finding (relative to the settings
file's directory, before anything is dropped: see settings/policy.py).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

from .core.errors import UsageError
from .core.findings import SEVERITY_RANK, fingerprint_all, sort_key
from .core.report import ScanReport
from .core.results import ModelResult
from .core.values import NO_VALUES
from .frontend import SUFFIXES, frontend_for, is_model_file, not_scanned, scan_frontends
from .runtime.sources import DEFAULT_LOAD, LoadOptions, resolve_weights, source_kind
from .settings.baseline import Baselines
from .settings.policy import apply_settings
from .settings.resolve import FileSettings, SettingsResolver

__all__ = ["ModelResult", "Outcome", "ScanManager", "expand_paths", "scan"]


def _readable_model_file(path: str, entry: str) -> bool:
    """In a folder, an unreadable file is passed over like any other non-model file."""
    try:
        return is_model_file(path, entry)
    except UsageError:
        return False


def named_paths(paths, keep=None):
    """(path, directory it came from or None) for each file: files named directly as they are,
    directories every .py/.onnx file below them (hidden directories left out) that ``keep``
    takes (each directory must yield one: ``keep`` says none). Every file is checked to exist
    and to be a regular file. A Hugging Face directory and a ``module:callable`` spec name one
    model each (runtime/sources.py)."""
    for path in paths:
        if source_kind(path):
            yield path, None
        elif os.path.isdir(path):
            found = sorted(
                os.path.join(root, f) for root, dirs, names in os.walk(path)
                for f in names if f.endswith(tuple(SUFFIXES)) and os.path.isfile(os.path.join(root, f))
                and not any(part.startswith(".") for part in root.split(os.sep) if part not in (".", "..")))
            yield from ((f, path) for f in found)
        elif not os.path.exists(path):
            raise UsageError(f"{path}: no such file or directory")
        elif not os.path.isfile(path):  # a FIFO would block the read, a device never end
            raise UsageError(f"{path}: not a regular file")
        else:
            yield path, None


def no_model_files(directory: str, entry: str) -> UsageError:
    return UsageError(f"{directory}: no model files (Python files defining {entry}() or .onnx files)")


def expand_paths(paths, entry: str = "get_model") -> list[str]:
    """Files named directly are taken as they are; directories yield their model files."""
    files, yielded = [], set()
    for path, directory in named_paths(paths):
        if directory is None or _readable_model_file(path, entry):
            files.append(path)
            yielded.add(directory)
    for path in paths:
        if os.path.isdir(path) and path not in yielded and not source_kind(path):
            raise no_model_files(path, entry)
    return files


def model_options(path: str, settings: FileSettings, load: LoadOptions, values) -> tuple[LoadOptions, object]:
    """(load options, value options) of one model: the command line's, with the settings'
    ``pythonpath`` searched after ``--pythonpath``, and a bare ``--weights`` made the shards
    beside the model (a Hugging Face directory's)."""
    return (load.searching(settings.config.pythonpath),
            replace(values, weights=resolve_weights(path, values.weights)))


def scan(paths, target, rules, entry="get_model", inputs="get_example_inputs", root=None,
         timeout=None, values=NO_VALUES):
    """Results and findings of every model, without settings (the Python API); fingerprints
    use paths relative to ``root``."""
    results, findings = [], []
    load = LoadOptions(entry, inputs)
    for path in expand_paths(paths, entry):
        model_values = replace(values, weights=resolve_weights(path, values.weights))
        result, found = frontend_for(path, entry).scan(path, target, rules, load, timeout, model_values)
        results.append(result)
        findings.extend(found)
    fingerprint_all(findings, root)
    findings.sort(key=sort_key)
    return results, findings


@dataclass
class Outcome:
    result: ModelResult
    new: list  # findings to report
    known: list  # findings the baseline records (or all of them, when writing a baseline)
    settings: FileSettings

    @property
    def failing(self) -> bool:
        """A new finding at or above the ``fail-on`` of this model's settings."""
        threshold = SEVERITY_RANK[self.settings.fail_on]
        return any(SEVERITY_RANK[f.severity] <= threshold for f in self.new)


class ScanManager:
    """One scan: the files it takes, each judged under its own settings (``resolver``).

    Bad input is said before any model loads: the settings files (``--config``), the
    baselines and the file list are read in the constructor and in ``prepare``.
    """

    def __init__(self, resolver: SettingsResolver, load: LoadOptions = DEFAULT_LOAD,
                 timeout: float | None = None, values=NO_VALUES, baseline: str | None = None,
                 recording: bool = False):
        self.resolver, self.load, self.entry = resolver, load, load.entry
        self.timeout, self.values = timeout, values
        self.baselines = Baselines(baseline, recording=recording)
        self.files: list[str] = []
        self.skipped: list[str] = []
        self.frontends: dict[str, list] = {}  # path -> the frontends that scan it
        self._rules = None
        self.started = time.monotonic()

    # ------------------------------------------------------------------ the files
    def discover(self, paths, skip_non_models: bool = False) -> None:
        """The files to scan and the frontends of each; a named file no frontend takes (a
        Python file without the entry point when no training rule is selected) is an error,
        unless ``skip_non_models``: pre-commit passes every changed .py file by name, and the
        hooks set it aside then. Files are read, never imported."""
        from .rules.engine import load_rules

        named = list(named_paths(paths))
        catalog = load_rules(checks=False, packs=self.resolver.rule_packs([p for p, _ in named]))
        self.files, self.skipped, self.frontends, yielded, refused = [], [], {}, set(), []
        for path, directory in named:
            selected = [r for r in catalog if r.id in self.resolver.for_path(path).rule_ids]
            try:
                frontends = scan_frontends(path, self.entry, selected)
            except UsageError:
                if directory is None:
                    raise
                frontends = []  # in a folder, an unreadable file is passed over like a non-model
            if frontends:
                self.files.append(path)
                self.frontends[path] = frontends
                yielded.add(directory)
            elif directory is not None:
                continue
            elif skip_non_models:
                self.skipped.append(path)
            else:
                refused.append(path)
        for path in paths:
            if os.path.isdir(path) and path not in yielded and not source_kind(path):
                raise no_model_files(path, self.entry)
        if refused:
            raise not_scanned(refused[0], self.entry)

    def prepare(self) -> None:
        """Read the baseline every settings file names, and judge each file's target (a bad
        one is said at once, before any model is scanned: --dtype float8 or nvfp4 and an ONNX file)."""
        self.baselines.read_all(s.baseline for s, _ in self.resolver.groups(self.files))
        for path in self.files:
            for frontend in self.frontends[path]:
                try:
                    frontend.judged_target(self.resolver.for_path(path).target)
                except UsageError as exc:
                    raise UsageError(f"{path}: {exc}") from None

    @property
    def read(self) -> list[str]:
        """Every file the scan reads (an output may not overwrite one)."""
        return [*self.files, *self.skipped, *(s.config.path for s, _ in self.resolver.groups(self.files))]

    @property
    def first(self) -> FileSettings:
        return self.resolver.for_path(self.files[0] if self.files else os.path.join(os.curdir, "_"))

    @property
    def target(self):
        """The report's top-level target; each model carries its own."""
        return self.first.target

    def rules(self):
        """The rule catalog of the scan: the bundled rules and the packs its settings name
        (read once, after ``discover``)."""
        from .rules.engine import load_rules

        if self._rules is None:
            self._rules = load_rules(packs=self.resolver.rule_packs(self.files))
        return self._rules

    # ------------------------------------------------------------------ scanning
    def scan_file(self, path: str, settings: FileSettings | None = None, rules=None, frontends=None):
        """(result, findings) of one file as its settings want to see them (no baseline yet);
        ``rules``: the catalog to select from (default: the scan's); ``frontends``: those that
        read the file (default: ``discover``'s). A Python model file is scanned as a model and,
        with training rules selected, as a training script: one result (the first error, if
        any), both findings."""
        settings = settings or self.resolver.for_path(path)
        chosen = [r for r in (rules if rules is not None else self.rules()) if r.id in settings.rule_ids]
        frontends = frontends or self.frontends[path]
        results, found = [], []
        load, values = self.model_options(path, settings)
        for frontend in frontends:
            target = frontend.judged_target(settings.target)
            result, more = frontend.scan(path, target, chosen, load, self.timeout, values, settings.cache_dir)
            results.append(result)
            found += more
        result = next((r for r in results if r.status == "error"), results[0])
        if len(results) > 1 and all(r.scopes is not None for r in results):
            result.scopes = tuple(dict.fromkeys(s for r in results for s in r.scopes))
        fingerprint_all(found, settings.config.root)
        target = frontends[0].judged_target(settings.target)
        return result, apply_settings(found, [result], chosen, self.resolver.known, settings.config, target)

    def model_options(self, path: str, settings: FileSettings) -> tuple[LoadOptions, object]:
        return model_options(path, settings, self.load, self.values)

    def scan_named(self, path: str, settings: FileSettings, rules):
        """(first result, findings) of the files ``path`` names, all judged under ``settings``
        (``plan`` scans one model file so)."""
        results, findings = [], []
        for file in expand_paths([path], self.entry):
            result, found = self.scan_file(file, settings, rules, [frontend_for(file, self.entry)])
            results.append(result)
            findings += found
        return results[0], sorted(findings, key=sort_key)

    def outcomes(self, before=None):
        """An ``Outcome`` per model file, as each finishes; ``before(index, path)`` is called
        before each file is loaded (a progress line)."""
        from .rules.sites import cap_per_rule

        for index, path in enumerate(self.files, 1):
            if before is not None:
                before(index, path)
            settings = self.resolver.for_path(path)
            result, found = self.scan_file(path, settings)
            new, known = self.baselines.split(found, settings.baseline)
            yield Outcome(result, cap_per_rule(new), known, settings)

    def run(self, listener=None, write_baseline: tuple[str, str] | None = None) -> ScanReport:
        """Scan every file; ``listener.before(index, path)`` / ``listener.finished(outcome)``
        as each model starts and ends. ``write_baseline``: (checked path, name as given): the
        findings are recorded there when no model failed."""
        if not self.files:
            return ScanReport([], [], self.target)
        done = []
        for outcome in self.outcomes(listener and listener.before):
            done.append(outcome)
            if listener is not None:
                listener.finished(outcome)
        report = ScanReport(
            results=[o.result for o in done], findings=[f for o in done for f in o.new],
            target=self.target, rules=self.rules(), hidden=[f for o in done for f in o.known],
            baselines=self.baselines.paths, failing=any(o.failing for o in done),
            settings=[s.as_json(group) for s, group in self.resolver.groups(self.files)],
            baseline_shown=write_baseline[1] if write_baseline else ", ".join(self.baselines.paths))
        if write_baseline and not report.failed:
            from .settings.baseline import write_baseline as record

            record(write_baseline[0], report.hidden, report.target, self.first.config.root)
        report.elapsed = time.monotonic() - self.started
        return report
