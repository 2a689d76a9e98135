"""What a frontend hands the scanner: the IR graph and what the capture could not see."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Capture:
    graph: object  # the ModelGraph (networkx DiGraph of OpNodes)
    frontend: str  # "fake", "eager", "structure" (PyTorch) or "onnx"
    skipped: list = field(default_factory=list)  # checks that could not run, and why
    notes: list = field(default_factory=list)  # what the report should say about the capture
