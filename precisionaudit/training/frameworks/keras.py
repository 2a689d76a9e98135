"""Keras 3's ``Model.compile`` under the ``mixed_float16`` policy: which optimizer is
wrapped in a ``LossScaleOptimizer``.

Read in Keras 3.15.1 (keras/src/trainers/trainer.py ``Trainer.compile``):
``self.optimizer = optimizers.get(optimizer)``, then, when ``auto_scale_loss`` and
``self.dtype_policy.name == "mixed_float16"``, ``self.optimizer =
LossScaleOptimizer(self.optimizer)``. Only the optimizer passed to ``compile`` is wrapped
(``"rmsprop"`` when none is passed): optimizers a ``compile()`` override stores on ``self``
itself and then calls ``super().compile()`` without stay plain, and a ``train_step`` that
applies gradients with them scales no loss (tensorflow #49368, keras-io PR #524).
"""
from __future__ import annotations

#: the method that wraps, and the argument it wraps (keyword, position)
COMPILE = "compile"
OPTIMIZER_ARGUMENT = ("optimizer", 0)
#: the step a Model subclass overrides to train with its own optimizers
TRAIN_STEP = "train_step"
SOURCE = "keras/src/trainers/trainer.py Trainer.compile: LossScaleOptimizer(self.optimizer) under mixed_float16"
