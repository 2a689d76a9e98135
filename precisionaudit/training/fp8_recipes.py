"""FP8 training set-ups in a script, read statically for PA441-PA443: Transformer Engine's
``DelayedScaling`` recipe and the ``fp8_group`` its amaxes are reduced over, and torchao's
``convert_to_float8_training``. Names are LibCST qualified names, so any import spelling
resolves; only literal arguments are judged.
"""
from __future__ import annotations

import libcst as cst

DELAYED_SCALING = {"transformer_engine.common.recipe.DelayedScaling"}
FP8_AUTOCAST = {"transformer_engine.pytorch.fp8_autocast", "transformer_engine.pytorch.autocast",
                "transformer_engine.pytorch.fp8.fp8_autocast"}
CONVERT = {"torchao.float8.convert_to_float8_training",
           "torchao.float8.float8_linear_utils.convert_to_float8_training"}
#: Megatron's data-parallel group (megatron.core.parallel_state, or ``mpu`` in older trees)
DATA_PARALLEL_GROUP = "get_data_parallel_group"


def mentions_fp8(text: str) -> bool:
    """Whether PA441-PA443 may find anything in a file with this text."""
    return "DelayedScaling" in text or "fp8_group" in text or "convert_to_float8_training" in text


def calls(script, names: set):
    """Every call of one of the qualified ``names`` in the script."""
    found = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node):
            if script.names_of(node.func) & names:
                found.append(node)

    script.module.visit(Visitor())
    return found


def keyword(call: cst.Call, name: str):
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def literal(node):
    """The value of an int / string literal, else None."""
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return None


def data_parallel_groups(script) -> list:
    """``fp8_group`` given Megatron's data-parallel group: as ``fp8_autocast``'s keyword, or
    assigned to a name or attribute called ``fp8_group`` (Megatron's ``self.fp8_group = ...``)."""
    def is_dp_group(value) -> bool:
        if not isinstance(value, cst.Call):
            return False
        names = script.names_of(value.func)
        func = value.func
        written = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        return any(n.endswith(DATA_PARALLEL_GROUP) for n in names) or written == DATA_PARALLEL_GROUP

    found = [keyword(c, "fp8_group") for c in calls(script, FP8_AUTOCAST)]
    found = [v for v in found if v is not None and is_dp_group(v)]

    class Assignments(cst.CSTVisitor):
        def visit_Assign(self, node):
            for target in node.targets:
                t = target.target
                name = t.attr.value if isinstance(t, cst.Attribute) else getattr(t, "value", None)
                if name == "fp8_group" and is_dp_group(node.value):
                    found.append(node.value)

    script.module.visit(Assignments())
    return found
