"""The ``Frontend`` protocol: what every command needs from one kind of input file, and the
part that model files (PyTorch, ONNX) share: running the file's work in a child process and
the graph scan (capture → measure → passes → rules).

A command never asks what kind a file is; it asks ``frontend_for(path)`` (``frontend/__init__``)
and calls the frontend. A new kind of input (a training config, a Keras model) is one more
class here, named in ``FRONTENDS``.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Protocol

from ..core.errors import CaptureError, UsageError
from ..core.exits import debug_requested, internal_error_line
from ..core.results import ModelResult
from ..core.target import Target
from ..core.values import NO_VALUES, ValueOptions
from ..runtime.sources import DEFAULT_LOAD, LoadOptions


@dataclass
class PlanRequest:
    """What ``precisionaudit plan`` asks of a frontend, once the file is scanned."""

    path: str
    target: Target  # the judged target (frontend.judged_target)
    result: ModelResult
    findings: list
    min_severity: str = "warning"
    prune: bool = False
    seed: int = 0
    load: LoadOptions = DEFAULT_LOAD  # entry, inputs, --input-shape, --pythonpath
    timeout: float | None = None
    values: ValueOptions = NO_VALUES
    output: str = "-"


@dataclass
class PlanOutcome:
    plan: object  # plan.file.OverridePlan
    header: list[str]  # the plan file's comment lines
    warnings: list[str] = field(default_factory=list)


@dataclass
class CheckRequest:
    """What ``precisionaudit check`` asks of a frontend (settings already applied)."""

    path: str
    plan_path: str | None
    target: Target  # the policy (--dtype float8: bf16 autocast with the recipe's FP8 Linears)
    device: str  # where it runs: auto, cuda, cpu, cpu-emulated
    tolerance: object
    seed: int = 0
    grad: bool = False
    load: LoadOptions = DEFAULT_LOAD  # entry, inputs, --input-shape, --pythonpath
    timeout: float | None = None
    values: ValueOptions = NO_VALUES
    #: check --train: optimizer steps instead of one forward (docs/check-report.md)
    train: bool = False
    steps: int = 20
    lr: float = 1e-4


class Frontend(Protocol):
    """One kind of input file. ``name`` is the kind ("pytorch", "onnx", "training")."""

    name: str
    plan_file: str  # the plan file's usual name (amp_plan.yaml, plan.yaml)

    def takes(self, path: str, entry: str, rules) -> bool:
        """Whether a scan with ``rules`` selected reads the file (decided from its source;
        nothing is imported)."""

    def judged_target(self, target: Target) -> Target:
        """The policy the file is judged under, given the one the settings ask for."""

    def scan(self, path: str, target: Target, rules, load: LoadOptions, timeout: float | None,
             values: ValueOptions, cache_dir: str | None = None) -> tuple[ModelResult, list]:
        """(result, findings) of the selected ``rules``; the file's own failures are the
        result's error, bad command input a UsageError. ``cache_dir``: where results read
        statically may be kept (the settings' ``cache-dir``; None: not kept)."""

    def explain(self, path: str, target: Target, load: LoadOptions, timeout: float | None,
                values: ValueOptions) -> str:
        """The text of ``precisionaudit explain``."""

    def validate_plan(self, prune: bool, input_shapes, values: ValueOptions) -> None:
        """Refuse plan options that do not apply to this kind (before anything is read)."""

    def plan(self, request: PlanRequest) -> PlanOutcome:
        """The override plan for the findings (pruned by runs with ``request.prune``)."""

    def check(self, request: CheckRequest) -> dict:
        """The check report (docs/check-report.md)."""

    def convert(self, path: str, plan_path: str | None, output: str, dtype: str, keep_io_types: bool, warn):
        """The file converted to ``dtype`` with the plan's parts kept in float32, verified and
        written to ``output``; ``warn(line)`` for each warning. Kinds that do not convert
        say what they take instead (UsageError)."""

    def plan_command(self, path: str, target: dict, value_flags: str = "") -> str:
        """The ``precisionaudit plan`` line a report suggests for the file."""


class ModelFrontend:
    """What model files share: their code (or graph) runs in a child process under
    ``--timeout``, and a scan is capture → measurement → analysis passes → rules."""

    name = ""
    plan_file = "amp_plan.yaml"
    #: the target flags a plan command names only where they differ from these
    plan_defaults = {"dtype": "float16", "mode": "autocast", "device": "cuda"}

    # ------------------------------------------------------------------ kind-specific parts
    def accepts(self, path: str, entry: str) -> bool:
        """Whether the file is a model of this kind, read from its source (never imported)."""
        return True

    def takes(self, path: str, entry: str, rules) -> bool:
        """Whether a scan with ``rules`` selected reads the file: a model file, always."""
        return self.accepts(path, entry)

    def not_taken(self, path: str, entry: str) -> UsageError:
        """Why a scan does not take the file (when no other frontend does either)."""
        return UsageError(f"{path}: not a Python model file or an .onnx file")

    def judged_target(self, target: Target) -> Target:
        return target

    def result_entry(self, path: str, load: LoadOptions) -> str:
        """What the report names as the model's entry."""
        return load.entry

    def preload(self) -> None:
        """Import what a child needs for this kind before the fork (see ``run``)."""

    def state_kept(self):
        """Process-wide state the file's code may change, put back after it."""
        return contextlib.nullcontext()

    def capture(self, path: str, target: Target, load: LoadOptions):
        raise NotImplementedError

    def measured(self, path: str, target: Target, load: LoadOptions, values: ValueOptions) -> dict:
        """The graph attributes measurement adds (real weights' statistics, per-op ranges)."""
        raise NotImplementedError

    def not_supported(self, path: str, what: str):
        raise UsageError(f"{path}: {what}")

    # ------------------------------------------------------------------ shared parts
    def measure(self, graph, path: str, target: Target, load: LoadOptions, values: ValueOptions) -> None:
        """Real weights' statistics and, with --data, the range pass's per-op ranges."""
        graph.graph["value_flags"] = values.flags()  # the plan a report suggests is made from the same values
        graph.graph.update(self.measured(path, target, load, values), headroom=values.headroom)

    def plan_command(self, path: str, target: dict, value_flags: str = "") -> str:
        flags = "".join(f" --{k} {target[k]}" for k, default in self.plan_defaults.items() if target[k] != default)
        return f"precisionaudit plan {path}{flags}{value_flags} -o {self.plan_file}"

    def preload_all(self) -> None:
        """Import, before the fork, what scanning needs (torch, for a model file), and the
        library modules earlier children imported, so that each child starts with them instead
        of importing them again. No model code runs here."""
        from .. import analysis  # noqa: F401
        from ..core.isolation import import_learned
        from ..rules import engine, sites  # noqa: F401

        self.preload()
        import_learned()

    @contextlib.contextmanager
    def running(self, path: str, timeout: float | None):
        """The block runs the file at ``path``: under ``--timeout``, with torch's process-wide
        state put back after it. The state is put back outside the time limit, so that a late
        limit cannot stop it halfway."""
        from ..core.signals import time_limit

        with self.state_kept(), time_limit(timeout):
            yield

    def run(self, path: str, timeout: float | None, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, which runs the file at ``path``, run in a child process
        (core.isolation) under ``running``: its value, or what it raised. A child that exits,
        crashes or is killed is a CaptureError naming the file (exit 2)."""
        from ..core.isolation import ChildLost, in_child

        self.preload_all()
        try:
            return in_child(self._running, path, timeout, fn, args, kwargs, timeout=timeout)
        except ChildLost as exc:
            raise CaptureError(f"{path}: {exc}") from None

    def _running(self, path, timeout, fn, args, kwargs):
        with self.running(path, timeout):
            return fn(*args, **kwargs)

    def scan(self, path, target, rules, load=DEFAULT_LOAD, timeout=None, values=NO_VALUES, cache_dir=None):
        """(ModelResult, findings) for one model file, scanned in a child process (core.isolation;
        a model run is never cached, so ``cache_dir`` is not read);
        its errors (a capture error, the time limit, a child that exits or crashes, even a bug of
        ours on a malformed model) become the result's error, so that the other models of a scan
        are still reported. Bad --weights / --data end the command (exit 2)."""
        from ..core.isolation import ChildLost, in_child
        from ..core.signals import TimeLimitExceeded

        self.preload_all()
        target, entry = self.judged_target(target), self.result_entry(path, load)
        try:
            result, findings = in_child(self.scan_here, path, target, rules, load, timeout, values,
                                        timeout=timeout)
        except (ChildLost, TimeLimitExceeded) as exc:
            suffix = " (--timeout)" if isinstance(exc, TimeLimitExceeded) else ""
            return ModelResult(path=path, entry=entry, target=target.as_dict(), status="error",
                               error=f"{path}: {exc}{suffix}"), []
        if result.status == "ok":
            result.plan_hint = self.plan_command(path, result.target, result.graph.graph.get("value_flags", ""))
        return result, findings

    def scan_here(self, path, target, rules, load, timeout, values):
        """``scan``'s work, in the process that runs it."""
        from ..analysis import run_passes
        from ..core.signals import TimeLimitExceeded
        from ..rules.engine import run_rules
        from ..rules.sites import collapse_sites

        entry = self.result_entry(path, load)
        result = ModelResult(path=path, entry=entry, target=target.as_dict(), scopes=("node", "graph", "source"))
        try:
            with self.running(path, timeout):
                captured = self.capture(path, target, load)
                # the capture may judge the model under its own policy (a Keras model's dtype policies)
                target = captured.graph.graph.get("target") or target
                result.target = target.as_dict()
                if values.weights or values.measure:
                    self.measure(captured.graph, path, target, load, values)
                graph = run_passes(captured.graph)
                model = path if path.endswith(f":{entry}") else f"{path}:{entry}"  # module:callable names it
                findings = collapse_sites(run_rules(graph, rules, target, path, model), graph)
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
            result.error = f"{path}: {internal_error_line(exc, debug_requested())}"
            return result, []
        result.frontend, result.nodes = captured.frontend, graph.number_of_nodes()
        result.skipped, result.notes, result.graph = captured.skipped, captured.notes, graph
        if graph.graph.get("structure_only"):
            skipped_rules = [r.id for r in rules if r.needs_inputs]
            if skipped_rules:
                result.skipped.append("needs example inputs: " + " ".join(skipped_rules))
        return result, findings

    def explain(self, path, target, load, timeout, values) -> str:
        return self.run(path, timeout, self._explained, path, self.judged_target(target), load, values)

    def _explained(self, path, target, load, values) -> str:
        from ..analysis import run_passes
        from ..report.explain import render

        captured = self.capture(path, target, load)
        if captured.frontend == "structure":
            raise CaptureError(f"{path}: explain needs example inputs; {captured.skipped[0]}")
        target = captured.graph.graph.get("target") or target
        if values.weights or values.measure:
            self.measure(captured.graph, path, target, load, values)
        return render(run_passes(captured.graph), path, target, captured.frontend, captured.notes)


def _traceback_text(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(exc))
