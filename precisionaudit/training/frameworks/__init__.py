"""The frameworks that own the training step, as data: what each API call does to the AMP
protocol (scales the loss, unscales, clips, steps through the loss scaler, updates the
scale) and under which precision setting, one table per framework (``lightning.py``,
``accelerate.py``, ``deepspeed.py``; the HF Trainer's optimizer in ``hf_trainer.py``,
Keras's ``compile`` in ``keras.py``). The step walk (``step/owned.py``) reads these tables
exactly as it reads raw torch calls: a framework is a table, not a rule.

Every behaviour cites the framework function that does it (``Api.source``): the tables were
written from the installed Lightning 2.6.6, accelerate 1.15.0, transformers 5.24.0 and
Keras 3.15.1 and from DeepSpeed's source (deepspeedai/DeepSpeed, read, not installed).
"""
from __future__ import annotations

from .table import (ACCUMULATES, CLIP, PREPARES, SCALED_BACKWARD, SCALES_LOSS, STEP, UNSCALE, UPDATE, Api, Framework,
                    Precision, apis)


def step_frameworks() -> tuple:
    """The frameworks whose owner objects the step walk follows (imported on first use)."""
    from .accelerate import ACCELERATE
    from .deepspeed import DEEPSPEED
    from .lightning import FABRIC, LIGHTNING

    return LIGHTNING, FABRIC, ACCELERATE, DEEPSPEED


def framework_of(names) -> Framework | None:
    """The framework whose owner the call of one of the qualified ``names`` makes."""
    for framework in step_frameworks():
        if framework.makers & names:
            return framework
    return None


__all__ = ["ACCUMULATES", "CLIP", "PREPARES", "SCALED_BACKWARD", "SCALES_LOSS", "STEP", "UNSCALE", "UPDATE", "Api",
           "Framework", "Precision", "apis", "framework_of", "step_frameworks"]
