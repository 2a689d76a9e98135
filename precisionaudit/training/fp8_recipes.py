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
    return [call for call, called in script.once(_sites)[0] if called & names]


def _sites(script) -> tuple[list, list]:
    """One walk for the three rules: every call of a name they read (with its qualified
    names), and every value assigned to a name or attribute called ``fp8_group``."""
    watched = DELAYED_SCALING | FP8_AUTOCAST | CONVERT
    found, groups = [], []

    class Reader(cst.CSTVisitor):
        def visit_Call(self, node):
            called = script.names_of(node.func) & watched
            if called:
                found.append((node, called))

        def visit_Assign(self, node):
            for target in node.targets:
                t = target.target
                if (t.attr.value if isinstance(t, cst.Attribute) else getattr(t, "value", None)) == "fp8_group":
                    groups.append(node.value)

    script.module.visit(Reader())
    return found, groups


def keyword(call: cst.Call, name: str):
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def literal(node):
    """The value of an int / string literal, else None."""
    return node.evaluated_value if isinstance(node, (cst.Integer, cst.SimpleString)) else None


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

    given = [keyword(c, "fp8_group") for c in calls(script, FP8_AUTOCAST)] + script.once(_sites)[1]
    return [v for v in given if v is not None and is_dp_group(v)]
