"""Keras mixed precision in a training script, read statically for PA431-PA433: where the
global dtype policy is set and to what, the models and layers built before it, the
``tf.GradientTape`` gradients, and every sign of loss scaling.

Names are LibCST qualified names, with ``tensorflow.keras.*`` and ``tf_keras.*`` read as the
``keras.*`` they are (Keras 2 under TensorFlow, Keras 3, tf-keras), so any import spelling
resolves. A policy given by anything but a string literal (or ``Policy("...")`` of one) is
unknown, and no rule fires on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

#: what sets the global policy (keras/src/dtype_policies/dtype_policy.py: keras.config
#: .set_dtype_policy, with set_global_policy as its legacy name; TF 2.1-2.3's experimental one)
SETS_POLICY = {"keras.mixed_precision.set_global_policy", "keras.mixed_precision.set_dtype_policy",
               "keras.config.set_dtype_policy", "keras.mixed_precision.experimental.set_policy"}
POLICY_CLASSES = {"keras.mixed_precision.Policy", "keras.mixed_precision.DTypePolicy",
                  "keras.dtype_policies.DTypePolicy", "keras.mixed_precision.experimental.Policy"}
#: a loss scaler: the optimizer wrapper (Keras 2 and 3) and TF 1's automatic graph rewrite
LOSS_SCALE_NAMES = {"keras.mixed_precision.LossScaleOptimizer", "keras.optimizers.LossScaleOptimizer",
                    "keras.mixed_precision.experimental.LossScaleOptimizer",
                    "tensorflow.train.experimental.enable_mixed_precision_graph_rewrite"}
#: the methods that scale a loss (Keras 2: get_scaled_loss; Keras 3: scale_loss)
SCALES_LOSS = {"get_scaled_loss", "scale_loss"}
#: what builds layers: their policy is the global one at the time they are built
BUILDS = ("keras.layers.", "keras.Sequential", "keras.Model", "keras.models.", "keras.applications.")


def keras_name(name: str) -> str:
    """``tensorflow.keras.layers.Dense`` and ``tf_keras.layers.Dense`` -> ``keras.layers.Dense``."""
    for prefix in ("tensorflow.keras.", "tensorflow.python.keras.", "tf_keras."):
        if name.startswith(prefix):
            return "keras." + name[len(prefix):]
    return name


def mentions_keras_policy(text: str) -> bool:
    """Whether PA431-PA433 may find anything in a file with this text."""
    return "mixed_" in text and ("keras" in text or "tensorflow" in text)


@dataclass
class PolicySet:
    call: cst.Call = field(repr=False)
    policy: str | None  # None: not a literal
    scope: object = field(repr=False)  # the FunctionDef (or Module) whose body runs the call


@dataclass
class KerasTraining:
    policies: list = field(default_factory=list)  # PolicySet, in source order
    builds: list = field(default_factory=list)  # (call, qualified name, scope)
    loss_scaling: list = field(default_factory=list)  # (node that scales a loss, its scopes)
    gradients: list = field(default_factory=list)  # (tape.gradient call, its scopes)

    def policies_at(self, script, node, scopes) -> list:
        """The policies set where they govern ``node``: at module level (import time), or
        earlier in a function that encloses it. A policy set in another function (another
        test method) is not the one this code runs under."""
        line = script.line_column(node)[0]
        return [p for p in self.policies if p.scope is scopes[0]
                or (p.scope in scopes and script.line_column(p.call)[0] < line)]


class _Reader(cst.CSTVisitor):
    def __init__(self, script):
        self.script = script
        self.found = KerasTraining()
        self.scopes: list = [script.module]
        self.tapes: list = [set()]  # per function: names bound by ``with GradientTape() as t``

    def visit_FunctionDef(self, node):
        self.scopes.append(node)
        self.tapes.append(set())

    def leave_FunctionDef(self, node):
        self.scopes.pop()
        self.tapes.pop()

    def _names(self, node) -> set[str]:
        return {keras_name(n) for n in self.script.names_of(node)}

    def visit_WithItem(self, node):
        if isinstance(node.item, cst.Call) and isinstance(node.asname, cst.AsName) \
                and isinstance(node.asname.name, cst.Name) \
                and any(n.endswith(".GradientTape") for n in self._names(node.item.func)):
            self.tapes[-1].add(node.asname.name.value)

    def visit_Call(self, node):
        names = self._names(node.func)
        func = node.func
        if names & SETS_POLICY:
            self.found.policies.append(PolicySet(node, self._policy(node), self.scopes[-1]))
        elif names & LOSS_SCALE_NAMES:
            self.found.loss_scaling.append((node, tuple(self.scopes)))
        elif any(n.startswith(BUILDS) for n in names):
            self.found.builds.append((node, min(n for n in names if n.startswith(BUILDS)), self.scopes[-1]))
        if isinstance(func, cst.Attribute):
            if func.attr.value in SCALES_LOSS:
                self.found.loss_scaling.append((node, tuple(self.scopes)))
            elif func.attr.value == "gradient" and isinstance(func.value, cst.Name) \
                    and func.value.value in self.tapes[-1]:
                self.found.gradients.append((node, tuple(self.scopes)))

    def visit_Attribute(self, node):
        if self._names(node) & LOSS_SCALE_NAMES:  # a reference (isinstance, a class attribute)
            self.found.loss_scaling.append((node, tuple(self.scopes)))

    def _policy(self, call: cst.Call) -> str | None:
        if not call.args:
            return None
        value = call.args[0].value
        if isinstance(value, cst.Call) and self._names(value.func) & POLICY_CLASSES and value.args:
            value = value.args[0].value
        return value.evaluated_value if isinstance(value, cst.SimpleString) else None


def keras_training(script) -> KerasTraining:
    """What the script does with Keras's mixed precision (read once per script)."""
    return script.once(_read)


def _read(script) -> KerasTraining:
    reader = _Reader(script)
    script.module.visit(reader)
    return reader.found
