"""accelerate (``Accelerator``): the step of an accelerate loop.

Read in accelerate 1.15.0 (accelerate/accelerator.py, accelerate/optimizer.py):

- ``Accelerator(mixed_precision="fp16")`` makes ``self.scaler`` (``get_grad_scaler``, a
  ``torch.amp.GradScaler``) only for "fp16" (``Accelerator.__init__``); "bf16", "fp8" and
  "no" have none. Without the argument the value comes from ``accelerate launch`` / the
  config file / ``ACCELERATE_MIXED_PRECISION``: unknown here.
- ``accelerator.backward(loss)``: ``self.scaler.scale(loss).backward()`` when there is a
  scaler (``Accelerator.backward``); the gradients stay scaled.
- ``accelerator.clip_grad_norm_`` / ``clip_grad_value_``: ``self.unscale_gradients()`` then
  torch's clip (``Accelerator.clip_grad_norm_``), on every call; ``unscale_gradients``
  calls ``scaler.unscale_`` for every prepared optimizer when ``mixed_precision == "fp16"``.
- ``optimizer.step()`` of a prepared optimizer (``AcceleratedOptimizer.step``): only when
  ``gradient_state.sync_gradients``; then ``scaler.step(self.optimizer)`` and
  ``scaler.update()``. ``zero_grad`` likewise only when syncing.
- ``with accelerator.accumulate(model):`` sets ``sync_gradients`` true on one micro-step in
  ``gradient_accumulation_steps`` (``Accelerator._do_sync``): on the others the optimizer
  does not step, so an ``unscale_`` there is followed by a second one before any
  ``update()``, which raises "unscale_() has already been called on this optimizer since
  the last update()" (accelerate #641).
"""
from __future__ import annotations

from .table import (ACCUMULATES, CLIP, PREPARES, SCALED_BACKWARD, STEP, UNSCALE, UPDATE, Api, Framework, Precision,
                    apis)

ACCELERATE = Framework(
    name="accelerate", title="accelerate",
    packages=frozenset({"accelerate"}),
    makers=frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"}),
    precision_keyword="mixed_precision",
    precisions={"fp16": Precision(scales=True), "bf16": Precision(scales=False), "fp8": Precision(scales=False),
                "no": Precision(scales=False)},
    default=None,
    unknown="accelerate's mixed_precision is 'fp16'",
    apis=apis(
        Api("backward", (SCALED_BACKWARD,),
            "accelerator.py Accelerator.backward: self.scaler.scale(loss).backward()"),
        Api("clip_grad_norm_", (UNSCALE, CLIP),
            "accelerator.py Accelerator.clip_grad_norm_: self.unscale_gradients(), then clip_grad_norm_"),
        Api("clip_grad_value_", (UNSCALE, CLIP),
            "accelerator.py Accelerator.clip_grad_value_: self.unscale_gradients(), then clip_grad_value_"),
        Api("unscale_gradients", (UNSCALE,),
            "accelerator.py Accelerator.unscale_gradients: scaler.unscale_(opt) for each prepared optimizer"),
        Api("prepare", (PREPARES,), "accelerator.py Accelerator.prepare: AcceleratedOptimizer wrappers"),
        Api("prepare_optimizer", (PREPARES,), "accelerator.py Accelerator.prepare_optimizer: AcceleratedOptimizer"),
        Api("accumulate", (ACCUMULATES,),
            "accelerator.py Accelerator.accumulate -> _do_sync: sync_gradients once every "
            "gradient_accumulation_steps"),
    ),
    optimizer={"step": Api("step", (UNSCALE, STEP, UPDATE),
                           "optimizer.py AcceleratedOptimizer.step: if sync_gradients: scaler.step(optimizer), "
                           "scaler.update()"),
               "zero_grad": Api("zero_grad", (), "optimizer.py AcceleratedOptimizer.zero_grad: if sync_gradients")},
    sync="sync_gradients",
    names=frozenset({"accelerator"}),
    spelled="mixed_precision={precision!r}",
    unscales_in="in optimizer.step() (AcceleratedOptimizer.step: scaler.step unscales)",
    remedy={"PA401": "use accelerator.clip_grad_norm_ / clip_grad_value_ with the same arguments: "
                     "it unscales first (Accelerator.unscale_gradients)",
            "PA402": "call it under `if accelerator.sync_gradients:`, on the micro-steps where the optimizer "
                     "steps"},
)
