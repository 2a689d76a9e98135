"""An ONNX model file: judged as converted whole (``pure``), run in onnxruntime, planned as the
nodes its float16 conversion keeps in float32, converted by ``precisionaudit convert``."""
from __future__ import annotations

import dataclasses

from ..core.errors import UsageError
from .base import CheckRequest, ModelFrontend, PlanOutcome, PlanRequest


class OnnxFrontend(ModelFrontend):
    name = "onnx"
    plan_file = "plan.yaml"
    plan_defaults = {"dtype": "float16"}

    def judged_target(self, target):
        """An ONNX graph is converted as a whole (``pure``; a mixed-precision file as its dtypes
        are), whatever --mode says. FP8 and FP4 targets judge PyTorch nn.Linear modules only."""
        if target.recipe:
            raise UsageError(f"--dtype {target.named_dtype} judges PyTorch models (the nn.Linear GEMMs Transformer "
                             "Engine and torchao convert); an ONNX model takes float16 or bfloat16")
        return dataclasses.replace(target, mode="pure")

    def result_entry(self, path, load) -> str:
        return "onnx"

    def preload(self) -> None:
        from ..capture.onnx import model  # noqa: F401 - no torch: ONNX scans stay torch-free

    def capture(self, path, target, load):
        from ..capture.onnx.model import capture_onnx

        return capture_onnx(path, target)

    def measured(self, path, target, load, values) -> dict:
        from ..capture.onnx.calibration import measure_onnx

        measured = measure_onnx(path, target, values)
        return dict(measured_nodes=measured.nodes, first_nonfinite=measured.first_nonfinite,
                    calibration={"source": values.data, "batches": measured.batches})

    def validate_plan(self, prune, input_shapes, values) -> None:
        """Every plan option applies to an ONNX model."""

    def plan(self, request: PlanRequest) -> PlanOutcome:
        """The nodes the float16 conversion keeps in float32; with ``prune`` only those a
        float16 run in onnxruntime needs."""
        from ..runtime.onnx.io import require_onnx_extra

        require_onnx_extra()
        from ..runtime.onnx.load import load_onnx
        from ..plan.onnx import header, make_onnx_plan
        from ..runtime.onnx.graph import refuse_converted
        from ..runtime.onnx.inputs import parse_shapes

        r = request
        model, pruned, warnings = load_onnx(r.path), None, []
        refuse_converted(model, r.path, "plan the float32 model (the file convert reads)")
        if r.prune:  # runs the model in onnxruntime: the check stage
            from ..prune.onnx import pruned_plan

            override_plan, notes, extra, pruned = pruned_plan(
                r.findings, model, r.path, r.target, r.min_severity, parse_shapes(r.load.input_shapes), r.seed,
                r.values)
        else:
            (override_plan, notes), extra = make_onnx_plan(r.findings, model, r.target, r.min_severity), []
        lines = header(r.path, override_plan, notes, self.plan_file if r.output == "-" else r.output) + extra
        if pruned is not None and not pruned.passed:
            inputs = f"--data {r.values.data}" if r.values.data else "the generated inputs"
            warnings.append(f"{r.path}: even the whole plan's float16 run is out of tolerance on {inputs} "
                            "(precisionaudit check shows where)")
        return PlanOutcome(override_plan, lines, warnings)

    def check(self, request: CheckRequest) -> dict:
        from ..runtime.onnx.io import require_onnx_extra

        require_onnx_extra()
        from ..check.onnx.runner import run_onnx_check
        from ..runtime.onnx.inputs import parse_shapes

        r = request
        if r.target.recipe:
            raise UsageError(f"{r.path}: check --dtype {r.target.named_dtype} emulates the quantized nn.Linear GEMMs "
                             "of a PyTorch model; an ONNX model is checked in float16")
        if r.train:
            raise UsageError(f"{r.path}: check --train trains PyTorch model files; an ONNX model cannot be trained")
        if r.grad:
            raise UsageError("--grad needs a PyTorch model file; an ONNX model is checked forward only")
        if r.values.weights:
            raise UsageError("--weights is for PyTorch model files; an ONNX model's initializers are its weights")
        return self.run(r.path, r.timeout, run_onnx_check, r.path, plan=r.plan_path, dtype=r.target.dtype,
                        tolerance=r.tolerance, seed=r.seed, input_shapes=parse_shapes(r.load.input_shapes),
                        values=r.values)

    def convert(self, path, plan_path, output, dtype, keep_io_types, warn):
        """The conversion (runtime.onnx.float16.Conversion) of the float32 model, written to
        ``output`` once it is verified to load; its warnings go to ``warn`` first. When the
        converted model does not load and the model itself does not either, that is said."""
        from ..runtime.onnx.io import require_onnx_extra

        require_onnx_extra()
        from ..apply.onnx import convert
        from ..runtime.onnx.load import load_onnx
        from ..core.outputs import checked_output
        from ..plan.file import load_plan
        from ..runtime.onnx.io import verify, write_atomic

        target = checked_output(output, [path, plan_path], "converted model")
        plan = load_plan(plan_path) if plan_path is not None else None
        original = load_onnx(path)
        conversion = convert(original, plan, dtype, keep_io_types, source=path)
        for line in conversion.warnings + [c.message() for c in conversion.clipped]:
            warn(line)
        try:
            verify(conversion.model, f"{path} converted to {dtype}")
        except UsageError:
            verify(original, path)  # when the model itself does not load, say that instead
            raise
        write_atomic(conversion.model, target)
        return conversion
