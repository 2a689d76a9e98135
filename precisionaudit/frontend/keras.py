"""A Keras 3 model file: a Python file that imports keras and whose ``get_model()`` returns a
``keras.Model``. It runs on Keras's torch backend (precisionaudit selects it before the file
is imported) and is judged under the model's own dtype policies."""
from __future__ import annotations

import contextlib
import dataclasses

from ..core.errors import UsageError
from .base import PlanOutcome
from .python_file import read_python
from .pytorch import PyTorchFrontend

#: rules whose verdict depends on the kernel that runs the op: accumulation (softmax, norms,
#: reductions, recurrent states) and Tensor Core paths
KERNEL_RULES = ("PA101", "PA102", "PA103", "PA104", "PA2")


class KerasFrontend(PyTorchFrontend):
    name = "keras"
    plan_file = "amp_plan.yaml"

    def accepts(self, path: str, entry: str) -> bool:
        """A .keras archive, or a Python file that imports keras and defines the entry."""
        return path.endswith(".keras") or (read_python(path).imports_keras and super().accepts(path, entry))

    def preload(self) -> None:
        import torch._dynamo  # noqa: F401 - FakeTensorMode imports it on first use

        from ..capture.keras.backend import import_keras
        from ..capture.keras.capture import capture_file  # noqa: F401

        import_keras()

    def state_kept(self):
        return _keras_state_kept(super().state_kept())

    def result_entry(self, path, load) -> str:
        return load.entry

    def capture(self, path, target, load):
        from ..capture.keras.capture import capture_file

        return capture_file(path, target, load)

    def scan_here(self, path, target, rules, load, timeout, values):
        """The model scan; a finding whose verdict rests on a kernel (its accumulator, its
        Tensor Core path) says which backend's kernel it describes."""
        result, findings = super().scan_here(path, target, rules, load, timeout, values)
        device = "CUDA" if result.target.get("device") == "cuda" and result.frontend == "fake" else "CPU"
        for finding in findings:
            if finding.rule.startswith(KERNEL_RULES):
                finding.message += f" (PyTorch's {device} kernel, as Keras's torch backend runs it)"
                finding.evidence["kernel"] = f"torch backend, PyTorch {device} kernel"
        return result, findings

    def measured(self, path, target, load, values) -> dict:
        raise UsageError(f"{path}: --weights and --data are not supported for Keras models yet")

    def validate_plan(self, prune, input_shapes, values) -> None:
        if prune:
            raise UsageError("plan --prune does not take Keras models yet (check --plan proves the plan)")
        super().validate_plan(prune, input_shapes, values)

    def plan(self, request):
        """The layers to give a float32 dtype policy: each finding's layer (an entry's ops
        are what the finding named; ``apply_keras_plan`` gives the whole layer float32)."""
        from ..plan.pytorch import header, make_plan

        r = request
        target = r.result.graph.graph.get("target") or r.target  # the model's own policies
        override_plan, notes = make_plan(r.findings, target, r.result.graph, r.min_severity)
        plan_path = self.plan_file if r.output == "-" else r.output
        lines = header(r.path, override_plan, target, notes, plan_path)
        # how to apply and check it, for a Keras model
        lines[1:5] = ["apply it to the Keras model (each entry's layers get a float32 dtype policy):",
                      "    import precisionaudit",
                      f'    handle = precisionaudit.apply_keras_plan(model, "{plan_path}")  # handle.restore() undoes it',
                      f"check it: precisionaudit check {r.path} --plan {plan_path}"]
        return PlanOutcome(override_plan, lines)

    def check(self, request):
        from ..check.keras import run_check

        r = request
        if r.target.recipe:
            raise UsageError(f"{r.path}: check --dtype {r.target.named_dtype} emulates the quantized nn.Linear GEMMs "
                             "of a PyTorch model; not a Keras model")
        if r.load.input_shapes or r.grad or r.train or r.values.weights or r.values.measure:
            raise UsageError("check of a Keras model takes neither --input-shape, --grad, --train, --weights "
                             "nor --data yet")
        target = dataclasses.replace(r.target, mode="pure")
        return self.run(r.path, r.timeout, run_check, r.path, target, plan=r.plan_path, tolerance=r.tolerance,
                        seed=r.seed, load=r.load)

    def plan_command(self, path: str, target: dict, value_flags: str = "") -> str:
        """The model's policies set dtype and mode: only --device is the user's."""
        device = "" if target.get("device", "cuda") == "cuda" else f" --device {target['device']}"
        return f"precisionaudit plan {path}{device} -o {self.plan_file}"


@contextlib.contextmanager
def _keras_state_kept(torch_state):
    """torch's state and Keras's global dtype policy (``set_global_policy`` in a model file)
    put back after the file's code, so that one model cannot change how the next is judged;
    Keras's session is cleared before it, so that its layer names (``dense_1``) do not depend
    on the models built before it in the process."""
    from ..capture.keras.backend import import_keras

    keras = import_keras()
    policy = keras.config.dtype_policy()
    keras.backend.clear_session()
    try:
        with torch_state:
            yield
    finally:
        keras.config.set_dtype_policy(policy)
