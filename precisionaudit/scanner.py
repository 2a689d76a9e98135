"""Scan manager: find model files, capture each, run the passes and the rules."""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field

from .core.errors import CaptureError, UsageError
from .core.exits import internal_error_line
from .core.findings import fingerprint_all, sort_key
from .core.values import NO_VALUES


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

    def to_json(self) -> dict:
        return {"path": self.path, "entry": self.entry, "frontend": self.frontend,
                "nodes": self.nodes, "status": self.status, "error": self.error,
                "target": self.target,
                "skipped": self.skipped, "notes": self.notes}


def looks_like_model_file(path: str, entry: str = "get_model") -> bool:
    """Decide from the source text alone (no import) whether a .py file defines the entry."""
    if path.endswith(".onnx"):
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    return f"def {entry}(" in text or f"{entry} =" in text


def _readable_model_file(path: str, entry: str) -> bool:
    """In a folder, an unreadable file is passed over like any other non-model file."""
    try:
        return looks_like_model_file(path, entry)
    except UsageError:
        return False


def expand_paths(paths, entry: str = "get_model") -> list[str]:
    """Files named directly are taken as they are; directories yield their model files."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(root, f) for root, dirs, names in os.walk(path)
                for f in names if f.endswith((".py", ".onnx")) and os.path.isfile(os.path.join(root, f))
                and not any(part.startswith(".") for part in root.split(os.sep) if part not in (".", "..")))
            found = [f for f in found if _readable_model_file(f, entry)]
            if not found:
                raise UsageError(f"{path}: no model files (Python files defining {entry}() or .onnx files)")
            files.extend(found)
        elif not os.path.exists(path):
            raise UsageError(f"{path}: no such file or directory")
        elif not os.path.isfile(path):  # a FIFO would block the read, a device never end
            raise UsageError(f"{path}: not a regular file")
        else:
            files.append(path)
    return files


def model_files(paths, entry: str = "get_model", skip_non_models: bool = False):
    """(model files, skipped files) among ``paths``.

    A named file that does not define the entry point (read from its source, never
    imported) is an error, unless ``skip_non_models``: pre-commit passes every changed .py
    file by name, and the hooks set it aside then.
    """
    files, skipped = [], []
    for path in expand_paths(paths, entry):
        if path.endswith((".py", ".onnx")) and looks_like_model_file(path, entry):
            files.append(path)
        elif skip_non_models:
            skipped.append(path)
        elif path.endswith(".py"):
            raise UsageError(f"{path}: no function {entry}() (use --entry to name the model factory)")
        else:
            raise UsageError(f"{path}: not a Python model file or an .onnx file")
    return files, skipped


def judged_target(path: str, target):
    """The policy a model file is judged under: an ONNX graph is converted as a whole
    (``pure``; a mixed-precision file as its dtypes are), whatever --mode says."""
    return dataclasses.replace(target, mode="pure") if path.endswith(".onnx") else target


@contextlib.contextmanager
def running_model_file(path: str, timeout: float | None):
    """The block runs the model file at ``path``: under ``--timeout``, with torch's process-wide
    state put back after it. The state is put back outside the time limit, so that a late
    limit cannot stop it halfway."""
    from .core.signals import time_limit

    with _torch_state_kept(path), time_limit(timeout):
        yield


def run_model_file(path: str, timeout: float | None, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, which runs the model file at ``path``, run in a child process
    (core.isolation) under ``running_model_file``: its value, or what it raised. A child that
    exits, crashes or is killed is a CaptureError naming the file (exit 2)."""
    from .core.isolation import ChildLost, in_child

    preload(path)
    try:
        return in_child(_running, path, timeout, fn, args, kwargs, timeout=timeout)
    except ChildLost as exc:
        raise CaptureError(f"{path}: {exc}") from None


def _running(path, timeout, fn, args, kwargs):
    with running_model_file(path, timeout):
        return fn(*args, **kwargs)


def _torch_state_kept(path: str):
    if path.endswith(".onnx"):
        return contextlib.nullcontext()  # no torch: ONNX scans stay torch-free
    from .capture.pytorch.user_code import torch_defaults_kept

    return torch_defaults_kept()


def capture_model(path: str, target, entry: str, inputs: str):
    if path.endswith(".onnx"):
        from .capture.onnx.model import capture_onnx

        return capture_onnx(path, target)
    from .capture.pytorch.capture import capture_file

    return capture_file(path, target, entry, inputs)


def scan_file(path, target, rules, entry="get_model", inputs="get_example_inputs", timeout=None,
              values=NO_VALUES):
    """(ModelResult, findings) for one model file, scanned in a child process (core.isolation);
    its errors (a capture error, the time limit, a child that exits or crashes, even a bug of
    ours on a malformed model) become the result's error, so that the other models of a scan
    are still reported. Bad --weights / --data end the command (exit 2)."""
    from .core.isolation import ChildLost, in_child
    from .core.signals import TimeLimitExceeded

    preload(path)
    if path.endswith(".onnx"):
        target, entry = judged_target(path, target), "onnx"
    try:
        return in_child(_scan_here, path, target, rules, entry, inputs, timeout, values, timeout=timeout)
    except (ChildLost, TimeLimitExceeded) as exc:
        suffix = " (--timeout)" if isinstance(exc, TimeLimitExceeded) else ""
        return ModelResult(path=path, entry=entry, target=target.as_dict(), status="error",
                           error=f"{path}: {exc}{suffix}"), []


def preload(path: str) -> None:
    """Import, before the fork, what scanning ``path`` needs (torch, for a model file), and the
    library modules earlier children imported, so that each child starts with them instead of
    importing them again. No model code runs here."""
    from . import analysis  # noqa: F401
    from .core.isolation import import_learned
    from .rules import engine, sites  # noqa: F401

    if path.endswith(".onnx"):
        from .capture.onnx import model  # noqa: F401
    else:
        import accelerate  # noqa: F401 - init_empty_weights builds the model
        import torch._dynamo  # noqa: F401 - FakeTensorMode imports it on first use (~2 s)

        from .capture.pytorch import capture  # noqa: F401
    import_learned()


def _scan_here(path, target, rules, entry, inputs, timeout, values):
    """scan_file's work, in the process that runs it."""
    from .analysis import run_passes
    from .core.signals import TimeLimitExceeded
    from .rules.engine import run_rules
    from .rules.sites import collapse_sites

    result = ModelResult(path=path, entry=entry, target=target.as_dict())
    try:
        with running_model_file(path, timeout):
            captured = capture_model(path, target, entry, inputs)
            if values.weights or values.measure:
                attach_measurement(captured.graph, path, target, entry, inputs, values)
            graph = run_passes(captured.graph)
            findings = collapse_sites(run_rules(graph, rules, target, path, f"{path}:{entry}"), graph)
    except CaptureError as exc:
        result.status, result.error, result.traceback = "error", str(exc), _traceback_text(exc)
        return result, []
    except UsageError:  # --weights / --data that do not fit the model: the command's input
        raise
    except TimeLimitExceeded as exc:
        result.status, result.error = "error", f"{path}: {exc} (--timeout)"
        return result, []
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not hide the other models
        result.status, result.traceback = "error", _traceback_text(exc)
        result.error = f"{path}: {internal_error_line(exc, debug=False)}"
        return result, []
    result.frontend, result.nodes = captured.frontend, graph.number_of_nodes()
    result.skipped, result.notes, result.graph = captured.skipped, captured.notes, graph
    if graph.graph.get("structure_only"):
        skipped_rules = [r.id for r in rules if r.needs_inputs]
        if skipped_rules:
            result.skipped.append("needs example inputs: " + " ".join(skipped_rules))
    return result, findings


def _traceback_text(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(exc))


def attach_measurement(graph, path, target, entry, inputs, values):
    """Real weights' statistics and, with --data, the range pass's per-op ranges."""
    graph.graph["value_flags"] = values.flags()  # the plan a report suggests is made from the same values
    if path.endswith(".onnx"):
        from .capture.onnx.calibration import measure_onnx

        measured = measure_onnx(path, target, values)
        graph.graph.update(measured_nodes=measured.nodes, first_nonfinite=measured.first_nonfinite,
                           headroom=values.headroom,
                           calibration={"source": values.data, "batches": measured.batches})
        return
    from .capture.pytorch.calibration import measure_file

    measurement = measure_file(path, target, entry, inputs, values)
    graph.graph.update(measured_calls=measurement.calls, weight_ranges=measurement.weights,
                       first_nonfinite=measurement.first_nonfinite, headroom=values.headroom,
                       calibration={"source": values.data, "batches": measurement.batches})


def scan(paths, target, rules, entry="get_model", inputs="get_example_inputs", root=None,
         timeout=None, values=NO_VALUES):
    """Results and findings of every model file; fingerprints use paths relative to ``root``."""
    results, findings = [], []
    for path in expand_paths(paths, entry):
        result, found = scan_file(path, target, rules, entry, inputs, timeout, values)
        results.append(result)
        findings.extend(found)
    fingerprint_all(findings, root)
    findings.sort(key=sort_key)
    return results, findings
