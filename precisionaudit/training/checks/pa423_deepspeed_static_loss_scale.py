"""PA423 deepspeed-static-loss-scale: a DeepSpeed config (JSON, or a dict literal of a
script) whose fp16 training has no loss scaling (a static ``loss_scale`` of at most 1; 0
is DeepSpeed's dynamic scaling), or with fp16 and bf16 both enabled (DeepSpeed refuses to start:
``'bfloat16 and fp16 modes cannot be simultaneously enabled'``, runtime/config.py).

Values are read as DeepSpeed's pydantic models read them (``DeepSpeedFP16Config``:
``enabled: bool``, ``loss_scale: float``); "auto" (filled in by the HF integration) or any
value DeepSpeed would not take is unknown, and the check stays silent.
"""
from __future__ import annotations

from ..registry import TrainingHit, training_check
from ..script_configs import deepspeed_dicts

_TRUE = (True, 1, "true", "True", "1", "yes", "on")
_FALSE = (False, 0, "false", "False", "0", "no", "off")


def enabled(value) -> bool | None:
    """``value`` as DeepSpeed's ``enabled: bool`` field reads it; None when unknown."""
    if isinstance(value, (bool, int, str)):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return None


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@training_check("PA423", reads="deepspeed")
def deepspeed_loss_scale(config):
    fp16 = config.get("fp16")
    fp16_on = enabled(fp16.get("enabled", False)) if isinstance(fp16, dict) else False
    if not fp16_on:
        return
    bf16_key = "bf16" if "bf16" in config.data else "bfloat16"  # bfloat16: the old name
    bf16 = config.get(bf16_key)
    if isinstance(bf16, dict) and enabled(bf16.get("enabled", False)):
        line, column = config.position(bf16_key, "enabled")
        yield TrainingHit(line, column, case="both-enabled", scope=bf16_key, subject=f"{bf16_key}.enabled",
                          values=dict(problem=f"fp16.enabled and {bf16_key}.enabled are both true: DeepSpeed "
                                              "stops at start ('bfloat16 and fp16 modes cannot be "
                                              "simultaneously enabled')",
                                      fix_to="enable one of fp16 and bf16 (bf16 needs no loss scaling)"))
        return
    scale = _number(fp16.get("loss_scale", 0))
    if scale is not None and 0 < scale <= 1:
        line, column = config.position("fp16", "loss_scale")
        yield TrainingHit(line, column, case="unscaled", scope="fp16", subject="fp16.loss_scale",
                          values=dict(problem=f"a static loss_scale of {fp16['loss_scale']} scales nothing: "
                                              "gradients under 3e-8 round to zero in fp16 and small ones "
                                              "lose their precision",
                                      fix_to='"loss_scale": 0 (dynamic loss scaling)'))


@training_check("PA423", reads="script")
def script_loss_scale(script):
    """The same, on DeepSpeed configs written as dict literals in a script."""
    for config in deepspeed_dicts(script):
        yield from deepspeed_loss_scale(config)
