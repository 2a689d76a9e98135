"""FP8 training set-ups in a script, read statically for PA441-PA443: Transformer Engine's
``DelayedScaling`` recipe and the ``fp8_group`` its amaxes are reduced over, and torchao's
``convert_to_float8_training``. Names are qualified names (``Script.names_of``), so any
import spelling resolves; only literal arguments are judged.
"""
from __future__ import annotations

import ast

from .syntax import argument

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
    return [call for call in script.index.calls if script.names_of(call.func) & names]


def data_parallel_groups(script) -> list:
    """``fp8_group`` given Megatron's data-parallel group: as ``fp8_autocast``'s keyword, or
    assigned to a name or attribute called ``fp8_group`` (Megatron's ``self.fp8_group = ...``)."""
    def is_dp_group(value) -> bool:
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        written = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return any(n.endswith(DATA_PARALLEL_GROUP) for n in script.names_of(func)) or written == DATA_PARALLEL_GROUP

    assigned = [(target, statement.value) for pairs in script.index.assigns.values() for target, statement in pairs
                if isinstance(statement, ast.Assign) and _named(target) == "fp8_group"]
    given = [argument(c, "fp8_group") for c in calls(script, FP8_AUTOCAST)]
    given += [value for _, value in sorted(assigned, key=lambda tv: (tv[0].lineno, tv[0].col_offset))]
    return [v for v in given if v is not None and is_dp_group(v)]


def _named(target) -> str | None:
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
