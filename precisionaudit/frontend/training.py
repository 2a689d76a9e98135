"""A training script (Python that trains a model: an AMP loop, a Trainer, accelerate) or a
DeepSpeed / accelerate config, read statically by the training stage. Nothing of it runs: no
child process, no torch import."""
from __future__ import annotations

from ..core.errors import UsageError
from ..core.results import ModelResult


class TrainingFrontend:
    """Only ``scan`` applies: a training script has no model to plan, check or convert."""

    name = "training"
    #: what the report names as the file's entry
    entry = "script"

    def __init__(self, configs: bool = False):
        #: the JSON/YAML frontend: a file is taken only when its text makes it a DeepSpeed or
        #: accelerate config (``training.configs.config_kind``)
        self.configs = configs

    def judged_target(self, target):
        return target

    def takes(self, path: str, entry: str, rules) -> bool:
        """Whether any of ``rules`` (those selected for the file) reads training code, and the
        file is a script or a DeepSpeed/accelerate config (told from its text)."""
        from ..training.configs import config_kind

        if not any(r.scope == "training" for r in rules):
            return False
        return not self.configs or config_kind(path) is not None

    def scan(self, path, target, rules, load=None, timeout=None, values=None):
        """(result, findings) of the selected training rules; a file that cannot be parsed is
        the result's error (the other files of a scan are still reported)."""
        from ..training.audit import audit_file

        result = ModelResult(path=path, entry=self.entry, frontend=self.name, target=target.as_dict(),
                             scopes=("training", "source"))
        try:
            return result, audit_file(path, rules)
        except UsageError as exc:
            result.status, result.error = "error", str(exc)
            return result, []
