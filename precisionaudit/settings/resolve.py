"""Which settings apply to each scanned file: the nearest config above the file, as ruff does.

The same file scans the same wherever the command is started: settings are looked up from
the file's own directory upward (``--config FILE`` names one file for every model,
``--isolated`` none). Command-line flags win over the file, which wins over the defaults.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.target import Target
from .config import Config, load_config, selected_ids

DEFAULTS = {"dtype": "float16", "mode": "autocast", "device": "cuda", "fail_on": "error"}


def shown_path(path: str | None) -> str | None:
    """A path as people read it: relative to the working directory when below it."""
    if path is None:
        return None
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


@dataclass
class FileSettings:
    """What one settings file (or the defaults) makes of the command line."""

    config: Config
    target: Target
    fail_on: str
    rule_ids: set[str]
    baseline: str | None

    @property
    def cache_dir(self) -> str | None:
        """Where the training findings cache lives (None: no cache)."""
        return self.config.cache_directory

    def as_json(self, files=()) -> dict:
        """One entry of ``--show-settings`` and of the JSON report's ``settings``."""
        c = self.config
        return {"config": shown_path(c.path), "files": list(files), "target": self.target.as_dict(),
                "fail_on": self.fail_on, "rules": sorted(self.rule_ids),
                "per_file_ignores": c.per_file_ignores, "severity": c.severity,
                "suppress": c.suppress, "baseline": shown_path(self.baseline),
                "rule_packs": [shown_path(p) for p in c.rule_packs],
                "pythonpath": [shown_path(p) for p in c.pythonpath]}


class SettingsResolver:
    """Per-file settings, worked out once per settings file.

    ``flags`` are the command line's dtype/mode/device/fail_on, None where not given;
    ``select``/``extend_select``/``ignore`` its rule codes; ``baseline`` its --baseline.
    """

    def __init__(self, known_ids, config_file=None, isolated=False, flags=None, select=(),
                 extend_select=(), ignore=(), baseline=None):
        self.known = list(known_ids)
        self.config_file, self.isolated = config_file, isolated
        self.flags = {k: v for k, v in (flags or {}).items() if v is not None}
        self.select, self.extend_select, self.ignore = list(select), list(extend_select), list(ignore)
        self.baseline = baseline
        self._by_config: dict[str | None, FileSettings] = {}
        self._by_dir: dict[str, FileSettings] = {}
        if config_file or isolated:  # one settings file (or none) for every model: check it now
            self._single = self._settings(load_config(config_file, isolated, self.known))

    def for_path(self, path: str) -> FileSettings:
        if self.config_file or self.isolated:
            return self._single
        directory = os.path.dirname(os.path.abspath(path))
        if directory not in self._by_dir:
            self._by_dir[directory] = self._settings(load_config(known_ids=self.known, start=directory))
        return self._by_dir[directory]

    def rule_packs(self, files) -> list[str]:
        """The rule pack directories the settings of ``files`` name, each once."""
        return list(dict.fromkeys(p for settings, _ in self.groups(files) for p in settings.config.rule_packs))

    def groups(self, files) -> list[tuple[FileSettings, list[str]]]:
        """(settings, the files it applies to), in the order the files come."""
        found: dict[int, tuple[FileSettings, list[str]]] = {}
        for path in files:
            settings = self.for_path(path)
            found.setdefault(id(settings), (settings, []))[1].append(path)
        return list(found.values())

    def _recipe(self, config: Config, dtype: str) -> str | None:
        """--recipe, else the file's recipe when the file's FP8 target is the one judged."""
        if "recipe" in self.flags:
            return self.flags["recipe"]
        return config.recipe if dtype == "float8" and self.flags.get("dtype") in (None, "float8") else None

    def _settings(self, config: Config) -> FileSettings:
        if config.path not in self._by_config:
            values = {k: self.flags.get(k) or getattr(config, k) or DEFAULTS[k] for k in DEFAULTS}
            self._by_config[config.path] = FileSettings(
                config=config, target=_target(values, self._recipe(config, values["dtype"]), self.flags.get("tp", 1)),
                fail_on=values["fail_on"],
                rule_ids=selected_ids(self.known + config.pack_ids, config, self.select,
                                      self.extend_select, self.ignore),
                baseline=self.baseline or config.baseline)
        return self._by_config[config.path]


def _target(values: dict, recipe: str | None, tp: int = 1) -> Target:
    """The judged target; ``--dtype float8`` is bf16 autocast with FP8 Linears under ``recipe``,
    ``--dtype nvfp4|mxfp4`` with FP4 Linears; ``tp``: the tensor-parallel degree (``--tp``)."""
    try:
        return Target.named(values["dtype"], values["mode"], values["device"], recipe, tp)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
