"""Apply an override plan to a Keras model: each entry's layers get a float32 dtype policy.

A Keras layer computes in its policy's compute dtype (it casts its inputs and reads its
variables in it), so the region a plan keeps in float32 is a whole layer: an entry's
``ops`` narrow nothing here. Under a mixed policy the variables are float32 already, so
setting ``layer.dtype_policy`` changes what the layer computes in and nothing it stores.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.globs import matches
from ..plan.file import OverridePlan, PlanError, load_plan


@dataclass
class KerasPlanHandle:
    """What ``apply_keras_plan`` changed: ``restore()`` gives every layer its policy back."""

    layers: dict = field(default_factory=dict)  # layer path -> the policy it had
    unmatched: list = field(default_factory=list)  # entries that match no layer
    _objects: dict = field(default_factory=dict, repr=False)

    def restore(self) -> None:
        for path, policy in self.layers.items():
            self._objects[path].dtype_policy = policy
        self.layers, self._objects = {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()
        return False


def apply_keras_plan(model, plan) -> KerasPlanHandle:
    """Give the layers each entry of ``plan`` (a path or an OverridePlan) matches a float32
    dtype policy; entries name layer paths as the scan reports them (``block.dense``, globs)."""
    from ..capture.keras.capture import layer_paths

    plan = plan if isinstance(plan, OverridePlan) else load_plan(plan)
    plan.require_pytorch()
    handle = KerasPlanHandle()
    layers = {path: layer for path, layer in layer_paths(model).values()}
    for override in plan.overrides:
        if override.dtype != "float32":
            raise PlanError(f"{plan.source}: entry {override.module!r}: a Keras layer is given a float32 policy, "
                            f"not {override.dtype}")
        hit = [path for path in layers if matches(override.module or "", path)]
        if not hit:
            handle.unmatched.append(override)
        for path in hit:
            if path not in handle.layers:
                handle.layers[path], handle._objects[path] = layers[path].dtype_policy, layers[path]
                layers[path].dtype_policy = "float32"
    return handle
