"""A PyTorch model: a model file (a Python file whose ``get_model()`` (``--entry``) returns the
module and whose ``get_example_inputs()`` (``--inputs``) its inputs), a Hugging Face directory
or config.json, or a ``module:callable`` spec (runtime/sources.py; the child opens them through
runtime/pytorch/source.py)."""
from __future__ import annotations

import contextlib

from ..core.errors import UsageError
from ..runtime.sources import entry_label, read_hf_config, source_kind
from .base import CheckRequest, ModelFrontend, PlanOutcome, PlanRequest
from .python_file import read_python


class PyTorchFrontend(ModelFrontend):
    name = "pytorch"
    plan_file = "amp_plan.yaml"

    def accepts(self, path: str, entry: str) -> bool:
        """Whether ``path`` names a PyTorch model: a Python file whose module level defines the
        entry as a model factory (read with ast, never imported: frontend/python_file.py), a
        ``module:callable``, or a Hugging Face directory whose config names a model_type (a
        config that does not is refused here, before anything is imported)."""
        kind = source_kind(path)
        if kind == "huggingface":
            read_hf_config(path)
        return kind is not None or read_python(path).defines_factory(entry)

    def not_taken(self, path: str, entry: str) -> UsageError:
        """Why a scan does not take the file (when no training rule reads it either)."""
        return UsageError(read_python(path).why_not(path, entry))

    def result_entry(self, path, load) -> str:
        return entry_label(path, load)

    def preload(self) -> None:
        import accelerate  # noqa: F401 - init_empty_weights builds the model
        import torch._dynamo  # noqa: F401 - FakeTensorMode imports it on first use (~2 s)

        from ..capture.pytorch import capture  # noqa: F401

    def state_kept(self):
        from ..runtime.pytorch.user_code import torch_defaults_kept
        from ..runtime.sources import imports_kept

        return _both(torch_defaults_kept(), imports_kept())

    def capture(self, path, target, load):
        from ..capture.pytorch.capture import capture_file

        return capture_file(path, target, load)

    def measured(self, path, target, load, values) -> dict:
        from ..capture.pytorch.calibration import measure_file

        measurement = measure_file(path, target, load, values)
        return dict(measured_calls=measurement.calls, measured_target_calls=measurement.target_calls,
                    weight_ranges=measurement.weights, first_nonfinite=measurement.first_nonfinite,
                    fp8_ranges=measurement.fp8, fp4_ranges=measurement.fp4,
                    calibration={"source": values.data, "batches": measurement.batches,
                                 "target_runs": measurement.low_runs})

    def validate_plan(self, prune, input_shapes, values) -> None:
        if prune and values.data not in (None, "example"):
            raise UsageError("plan --prune --data FILE is for ONNX models; a PyTorch model's plan is pruned "
                             "on its example inputs (--data example; check --data proves the whole plan "
                             "on the data)")

    def plan(self, request: PlanRequest) -> PlanOutcome:
        """Autocast / pure-mode regions by module; with ``prune`` only those the example
        inputs' forwards need, with ``--data`` checked on the data and grown where it fails
        (the check stage runs them). The plan's forward runs once on fake tensors first: a
        plan must never make the model raise."""
        from ..plan.pytorch import header, make_plan
        from ..report.progress import progress_printer

        r = request
        override_plan, notes = make_plan(r.findings, r.target, r.result.graph, r.min_severity)
        device = "cpu" if r.target.device == "cpu" else "auto"
        searched, warnings = [], []
        if r.prune:
            from ..prune.pytorch import header_lines, pruned_plan

            pruned = self.run(r.path, r.timeout, pruned_plan, override_plan, r.path, r.target, r.seed, r.load,
                              device, progress_printer(), r.values.weights)
            override_plan, searched = pruned.plan, header_lines(pruned, r.seed)
            if not pruned.passed:
                warnings.append(f"{r.path}: no plan found passes the check on the example inputs: "
                                f"{pruned.stuck} (precisionaudit check shows where)")
        elif r.values.measure and not r.target.recipe:
            from ..prune.pytorch import checked_plan

            checked = self.run(r.path, r.timeout, checked_plan, override_plan, r.path, r.target, r.seed, r.load,
                               device, progress_printer(), r.values)
            override_plan, searched = checked.plan, checked.header_lines(r.values.data)
            if not checked.passed:
                warnings.append(f"{r.path}: no plan passes the check on --data {r.values.data}, grown or not: "
                                f"{checked.stuck} (precisionaudit check shows where)")
        if override_plan.overrides or override_plan.keep_fp32_modules:
            from ..check.pytorch.plan_forward import plan_forward_error_of

            error = self.run(r.path, r.timeout, plan_forward_error_of, r.path, r.target, r.load, override_plan)
            if error is not None:  # our bug: a plan must never make a model raise
                raise RuntimeError(f"{r.path}: the plan made for it makes its forward fail on fake tensors "
                                   f"({error}); it was not written")
        lines = header(r.path, override_plan, r.target, notes, self.plan_file if r.output == "-" else r.output,
                       r.values.flags(), r.findings, r.result.graph, r.min_severity)
        return PlanOutcome(override_plan, lines + searched, warnings)

    def check(self, request: CheckRequest) -> dict:
        from ..check.pytorch.runner import run_check
        from ..report.progress import progress_printer

        r = request
        if (r.train or r.grad) and r.target.fp8_recipe:
            flag = "--train" if r.train else "--grad"
            raise UsageError(f"check {flag} --dtype float8 is not supported: the FP8 check emulates the "
                             f"forward only (E5M2 gradients are not emulated); drop {flag}")
        if r.train:
            if r.grad or r.values.weights or r.values.measure:
                raise UsageError("check --train takes neither --grad (it trains) nor --weights/--data")
            return self.run(r.path, r.timeout, _train_report, r.path, r.target, steps=r.steps, lr=r.lr,
                            seed=r.seed, plan=r.plan_path, device=r.device, load=r.load)
        return self.run(r.path, r.timeout, run_check, r.path, r.target, plan=r.plan_path, device=r.device,
                        tolerance=r.tolerance, seed=r.seed, grad=r.grad, load=r.load,
                        progress=progress_printer(), values=r.values)

    def convert(self, path, plan_path, output, dtype, keep_io_types, warn):
        self.not_supported(path, "convert takes an ONNX model (.onnx); PyTorch models take a plan "
                           "through precisionaudit.apply_plan / to_low_precision")


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


def _train_report(path, target, **options) -> dict:
    """check --train's report (JSON-ready), made in the child that runs the model."""
    from ..check.pytorch.training import train_check_file

    return train_check_file(path, target, **options).to_dict()
