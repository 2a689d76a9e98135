"""A ``precisionaudit.watch`` log directory (per-rank ``events-rank*.jsonl``), as an input.

``scan`` reads the log into its findings (PA7xx) and ``plan`` writes the plan they call for;
nothing runs, no torch is imported. A log has no model to explain, check or convert: those
say what to give them instead. The directory is one input, not a folder of model files
(``whole_directory``): ``plan`` reads it whole.
"""
from __future__ import annotations

import glob
import os

from ..core.errors import UsageError
from ..core.results import ModelResult
from .base import PlanOutcome, PlanRequest


class WatchFrontend:
    name = "watch"
    plan_file = "amp_plan.yaml"
    #: the path is one input read whole (plan does not look for model files inside it)
    whole_directory = True

    @staticmethod
    def is_log(path: str) -> bool:
        """A directory holding watch event files."""
        from ..watch.log import EVENTS_GLOB

        return os.path.isdir(path) and bool(glob.glob(os.path.join(glob.escape(path), EVENTS_GLOB)))

    def read(self, path: str) -> tuple[dict, dict]:
        """(the log's report without findings, {rank: events}); a WatchLogError for a missing
        or foreign directory."""
        from ..watch.log import read_log, summarize

        ranks = read_log(path)
        return summarize(ranks), ranks

    def findings(self, report: dict, path: str, rules=None) -> list:
        from ..watch.findings import watch_findings

        return watch_findings(report, path, rules)

    # ------------------------------------------------------------------ the protocol
    def takes(self, path: str, entry: str, rules) -> bool:
        return self.is_log(path)

    def accepts(self, path: str, entry: str) -> bool:
        return self.is_log(path)

    def judged_target(self, target):
        return target

    def scan(self, path, target, rules, load=None, timeout=None, values=None, cache_dir=None):
        report, _ = self.read(path)
        result = ModelResult(path=path, entry="watch", frontend=self.name, target=target.as_dict(),
                             scopes=("watch",))
        return result, self.findings(report, path, [r for r in rules if r.scope == "watch"])

    def validate_plan(self, prune, input_shapes, values) -> None:
        if prune or input_shapes or values.weights or values.measure:
            raise UsageError("plan of a watch log takes neither --prune, --input-shape, --weights nor --data: "
                             "the log is the evidence")

    def plan(self, request: PlanRequest) -> PlanOutcome:
        from ..plan.watch import watch_plan

        report, _ = self.read(request.path)
        plan, header = watch_plan(report, request.findings, request.path, request.min_severity)
        return PlanOutcome(plan, header)

    def _no_model(self, path: str, what: str):
        raise UsageError(f"{path}: a watch log has no model to {what}; give the model file, with the plan "
                         f"`precisionaudit plan {path}` wrote")

    def explain(self, path, target, load, timeout, values) -> str:
        self._no_model(path, "explain")

    def check(self, request):
        self._no_model(request.path, "check")

    def convert(self, path, plan_path, output, dtype, keep_io_types, warn):
        self._no_model(path, "convert")

    def plan_command(self, path: str, target: dict, value_flags: str = "") -> str:
        return f"precisionaudit plan {path} -o {self.plan_file}"
