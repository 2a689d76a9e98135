"""A training script (Python that trains a model: an AMP loop, a Trainer, accelerate) or a
DeepSpeed / accelerate config, read statically by the training stage. Nothing of it runs: no
child process, no torch import.

Which config a file may be is said here, by its suffix (a .json file may be a DeepSpeed
config, a .yaml one an accelerate config); whether it is one, the training stage says from
its contents (``training.configs.read_config``), parsing it once for ``takes`` and ``scan``.
"""
from __future__ import annotations

import os

from ..core.errors import UsageError
from ..core.results import ModelResult

#: the config a file of each suffix may be
CONFIG_KINDS = {".json": "deepspeed", ".yaml": "accelerate", ".yml": "accelerate"}


def config_kind(path: str) -> str | None:
    """The kind of config ``path`` may be by its suffix; None for a script."""
    return CONFIG_KINDS.get(os.path.splitext(path)[1].lower())


def audit(path: str, rules, cache_dir: str | None = None) -> list:
    """The training findings of ``path``: a script, or a config of its suffix's kind (no
    finding when the file is not one). A file that cannot be read or parsed is a UsageError."""
    from ..training.audit import audit_config, audit_script
    from ..training.configs import read_config

    kind = config_kind(path)
    if kind is None:
        from ..training.cache import Cache

        return audit_script(path, rules, Cache(cache_dir) if cache_dir else None)
    config = read_config(path, kind)
    return audit_config(config, rules) if config is not None else []


class TrainingFrontend:
    """Only ``scan`` applies: a training script has no model to plan, check or convert."""

    name = "training"
    #: what the report names as the file's entry
    entry = "script"

    def __init__(self, configs: bool = False):
        #: the JSON/YAML frontend: a file is taken only when its contents make it a DeepSpeed
        #: or accelerate config
        self.configs = configs
        #: path -> the config (or its UsageError) ``takes`` read, for ``scan``
        self._read: dict = {}

    def judged_target(self, target):
        return target

    def takes(self, path: str, entry: str, rules) -> bool:
        """Whether any of ``rules`` (those selected for the file) reads training code, and the
        file is a script or a DeepSpeed/accelerate config (told from its contents)."""
        from ..training.configs import read_config

        if not any(r.scope == "training" for r in rules):
            return False
        if not self.configs:
            return True
        kind = config_kind(path)
        try:
            config = read_config(path, kind) if kind else None
        except UsageError as exc:
            config = exc  # a broken config of ours: its scan reports it
        if config is not None:
            self._read[path] = config
        return config is not None

    def scan(self, path, target, rules, load=None, timeout=None, values=None, cache_dir=None):
        """(result, findings) of the selected training rules; a file that cannot be parsed is
        the result's error (the other files of a scan are still reported)."""
        from ..training.audit import audit_config

        result = ModelResult(path=path, entry=self.entry, frontend=self.name, target=target.as_dict(),
                             scopes=("training", "source"))
        try:
            config = self._read.pop(path, None)
            if isinstance(config, UsageError):
                raise config
            return result, (audit_config(config, rules) if config is not None else audit(path, rules, cache_dir))
        except UsageError as exc:
            result.status, result.error = "error", str(exc)
            return result, []
