"""What scanning one file gives the reports: its status, what ran and what could not."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelResult:
    path: str
    entry: str
    frontend: str | None = None
    nodes: int = 0
    status: str = "ok"
    error: str | None = None
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    graph: object = None
    traceback: str | None = None  # for --debug; not part of the report
    target: dict | None = None  # the policy this model was judged under (ONNX: pure)
    plan_hint: str | None = None  # the `precisionaudit plan` line for this file; not in the JSON
    scopes: tuple | None = None  # the rule scopes that ran on the file (None: every one); not in the JSON

    def to_json(self) -> dict:
        return {"path": self.path, "entry": self.entry, "frontend": self.frontend,
                "nodes": self.nodes, "status": self.status, "error": self.error,
                "target": self.target,
                "skipped": self.skipped, "notes": self.notes}
