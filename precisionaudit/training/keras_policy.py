"""Keras mixed precision in a training script, read statically for PA431-PA433: where the
global dtype policy is set and to what, the models and layers built before it, the
``tf.GradientTape`` gradients, and every sign of loss scaling.

Names are qualified names (``Script.names_of``), with ``tensorflow.keras.*`` and ``tf_keras.*`` read as the
``keras.*`` they are (Keras 2 under TensorFlow, Keras 3, tf-keras), so any import spelling
resolves. A policy given by anything but a string literal (or ``Policy("...")`` of one) is
unknown, and no rule fires on it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .syntax import FUNCTIONS, string

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
    call: ast.Call = field(repr=False)
    policy: str | None  # None: not a literal
    scope: object = field(repr=False)  # the function (or Module) whose body runs the call


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
        return [p for p in self.policies if p.scope is scopes[0]
                or (p.scope in scopes and p.call.lineno < node.lineno)]


def keras_training(script) -> KerasTraining:
    """What the script does with Keras's mixed precision (read once per script)."""
    return script.once(_read)


def _read(script) -> KerasTraining:
    found, tapes = KerasTraining(), {}
    index = script.index

    def names(node) -> set[str]:
        return {keras_name(n) for n in script.names_of(node)}

    for call in index.calls:
        called, func = names(call.func), call.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        tape = any(n.endswith(".GradientTape") for n in called)
        if not (tape or called & (SETS_POLICY | LOSS_SCALE_NAMES) or any(n.startswith(BUILDS) for n in called)
                or method in SCALES_LOSS or method == "gradient"):
            continue
        scopes = _scopes(script, call)
        holder = index.parents.get(call)
        if tape and isinstance(holder, ast.withitem) and holder.context_expr is call \
                and isinstance(holder.optional_vars, ast.Name):
            tapes.setdefault(scopes[-1], set()).add(holder.optional_vars.id)
        if called & SETS_POLICY:
            found.policies.append(PolicySet(call, _policy(call, names), scopes[-1]))
        elif called & LOSS_SCALE_NAMES:
            found.loss_scaling.append((call, scopes))
        elif any(n.startswith(BUILDS) for n in called):
            found.builds.append((call, min(n for n in called if n.startswith(BUILDS)), scopes[-1]))
        if method in SCALES_LOSS:
            found.loss_scaling.append((call, scopes))
        elif method == "gradient" and isinstance(func.value, ast.Name) and func.value.id in tapes.get(scopes[-1], ()):
            found.gradients.append((call, scopes))
    for chain in index.chains():
        for node in chain[1:]:
            if names(node) & LOSS_SCALE_NAMES:  # a reference: isinstance, an attribute
                found.loss_scaling.append((node, _scopes(script, node)))
    return found


def optimizers_compile_leaves_plain(script, call) -> str | None:
    """Whether the ``tape.gradient`` ``call`` is in a ``train_step`` of a Model subclass
    whose ``compile()`` override keeps optimizers of its own on ``self`` and calls
    ``super().compile()`` with none: Keras wraps only the optimizer ``compile`` receives in a
    ``LossScaleOptimizer`` (``frameworks/keras.py``), so the ones it stepped are plain.
    Returns the plain optimizers the step applies (``self.d_optimizer``), or None."""
    from .frameworks.keras import COMPILE, OPTIMIZER_ARGUMENT, TRAIN_STEP

    function, cls = script.index.function_of(call), script.index.class_of(call)
    if function is None or cls is None or function.name != TRAIN_STEP:
        return None
    compile_ = script.index.methods.get(cls.name, {}).get(COMPILE)
    if compile_ is None:
        return None
    keyword, position = OPTIMIZER_ARGUMENT
    supers = [c for c in ast.walk(compile_) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
              and c.func.attr == COMPILE and isinstance(c.func.value, ast.Call)
              and getattr(c.func.value.func, "id", None) == "super"]
    if not supers or any(len(c.args) > position or any(k.arg in (keyword, None) for k in c.keywords)
                         for c in supers):
        return None  # the optimizer goes to Keras's compile (or may, through **kwargs)
    stored = {t.attr for node in ast.walk(compile_) if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self"}
    applied = {c.func.value.attr for c in ast.walk(function) if isinstance(c, ast.Call)
               and isinstance(c.func, ast.Attribute) and c.func.attr in ("apply_gradients", "apply")
               and isinstance(c.func.value, ast.Attribute) and getattr(c.func.value.value, "id", None) == "self"}
    plain = sorted(applied & stored)
    return ", ".join(f"self.{name}" for name in plain) if plain else None


def _scopes(script, node) -> tuple:
    """The module and the functions around ``node``, outermost first."""
    functions, parent = [], script.index.parents.get(node)
    while parent is not None:
        if isinstance(parent, FUNCTIONS):
            functions.append(parent)
        parent = script.index.parents.get(parent)
    return (script.tree, *reversed(functions))


def _policy(call: ast.Call, names) -> str | None:
    if not call.args:
        return None
    value = call.args[0]
    if isinstance(value, ast.Call) and names(value.func) & POLICY_CLASSES and value.args:
        value = value.args[0]
    return string(value)
