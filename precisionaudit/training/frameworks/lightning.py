"""Lightning 2.x (``lightning.pytorch`` / ``pytorch_lightning``) and Fabric: the step of a
LightningModule in manual optimization, and of a Fabric loop.

Read in Lightning 2.6.6:

- ``Trainer(precision=...)`` picks the precision plugin (``_PRECISION_INPUT`` in
  lightning/fabric/plugins/precision/precision.py; the aliases of
  ``_PRECISION_INPUT_STR_ALIAS_CONVERSION``: 16 -> "16-mixed", "bf16" -> "bf16-mixed",
  32 -> "32-true"). "16-mixed" is ``MixedPrecision`` with a ``torch.amp.GradScaler``
  (lightning/pytorch/plugins/precision/amp.py ``MixedPrecision.__init__``); "bf16-mixed" has
  none; "16-true"/"bf16-true" are ``HalfPrecision``, whose ``convert_module`` converts the
  parameters (plugins/precision/half.py).
- ``self.manual_backward(loss)`` -> ``strategy.backward`` -> ``MixedPrecision.pre_backward``:
  ``self.scaler.scale(tensor)``; the gradients stay scaled.
- ``opt.step()`` of ``self.optimizers()`` (a ``LightningOptimizer``, core/optimizer.py
  ``LightningOptimizer.step``) -> ``strategy.optimizer_step`` ->
  ``MixedPrecision.optimizer_step``: the closure, ``self.scaler.unscale_(optimizer)``,
  ``_after_closure`` (the ``on_before_optimizer_step`` hooks), ``self.scaler.step`` and
  ``self.scaler.update()``.
- ``self.clip_gradients(opt, ...)`` -> ``MixedPrecision.clip_gradients`` ->
  ``Precision.clip_gradients``: clips the gradients as they are; nothing unscales them in
  manual optimization before ``opt.step()`` (Lightning #18089, open; PR #19536 unmerged).
  ``configure_gradient_clipping`` is called only in automatic optimization
  (``Precision._clip_gradients`` returns when ``not model.automatic_optimization``), after
  ``unscale_``; so is ``on_before_optimizer_step``, in both modes.
- Fabric: ``fabric.backward(loss)`` -> ``MixedPrecision.backward`` (lightning/fabric/
  plugins/precision/amp.py: ``self.scaler.scale(tensor)``); ``fabric.clip_gradients`` ->
  ``Strategy.clip_gradients_norm``/``_value``: ``self.precision.unscale_gradients(optimizer)``
  first (fabric/strategies/strategy.py); ``optimizer.step()`` of ``fabric.setup(...)`` ->
  ``_FabricOptimizer.step`` -> ``MixedPrecision.optimizer_step``: ``self.scaler.step`` and
  ``self.scaler.update()``.
"""
from __future__ import annotations

from .table import (CLIP, PREPARES, SCALED_BACKWARD, STEP, UNSCALE, UPDATE, Api, Framework, Precision, apis)

#: Lightning's Trainer, however imported
TRAINERS = frozenset({"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer",
                      "lightning.pytorch.trainer.Trainer", "pytorch_lightning.trainer.Trainer",
                      "lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer"})
#: the LightningModule base class, however imported
MODULES = frozenset({"lightning.LightningModule", "lightning.pytorch.LightningModule",
                     "pytorch_lightning.LightningModule", "lightning.pytorch.core.LightningModule",
                     "pytorch_lightning.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
                     "pytorch_lightning.core.module.LightningModule",
                     "pytorch_lightning.core.lightning.LightningModule"})
#: strategies whose precision plugin is the plain one (DeepSpeed and FSDP bring their own)
PLAIN_STRATEGIES = frozenset({"auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "single_device", "dp"})

#: ``precision=`` spellings (the aliases as Lightning converts them)
PRECISIONS = {
    "16-mixed": Precision(scales=True), "16": Precision(scales=True), 16: Precision(scales=True),
    "bf16-mixed": Precision(scales=False), "bf16": Precision(scales=False),
    "16-true": Precision(scales=False, params="float16"), "bf16-true": Precision(scales=False, params="bfloat16"),
    "32-true": Precision(scales=False), "32": Precision(scales=False), 32: Precision(scales=False),
    "64-true": Precision(scales=False, params="float64"), "64": Precision(scales=False, params="float64"),
    64: Precision(scales=False, params="float64"),
    "transformer-engine": Precision(scales=False), "transformer-engine-float16": Precision(scales=False),
}

_STEP = Api("step", (UNSCALE, STEP, UPDATE),
            "core/optimizer.py LightningOptimizer.step -> plugins/precision/amp.py MixedPrecision.optimizer_step: "
            "scaler.unscale_(optimizer), on_before_optimizer_step, scaler.step(optimizer), scaler.update()")

LIGHTNING = Framework(
    name="lightning", title="Lightning",
    packages=frozenset({"lightning", "pytorch_lightning"}),
    precision_keyword="precision", precisions=PRECISIONS, default="32-true",
    unknown="the Trainer's precision is '16-mixed'",
    apis=apis(
        Api("manual_backward", (SCALED_BACKWARD,),
            "core/module.py LightningModule.manual_backward -> strategy.backward -> "
            "plugins/precision/amp.py MixedPrecision.pre_backward: scaler.scale(tensor)"),
        Api("clip_gradients", (CLIP,),
            "core/module.py LightningModule.clip_gradients -> MixedPrecision.clip_gradients -> "
            "Precision.clip_gradients: no unscale_ (Lightning #18089)"),
        Api("optimizers", (PREPARES,),
            "core/module.py LightningModule.optimizers: LightningOptimizer wrappers (use_pl_optimizer=True)"),
    ),
    optimizer={"step": _STEP},
    spelled="precision={precision!r}",
    unscales_in="inside opt.step() (MixedPrecision.optimizer_step calls scaler.unscale_ after the closure)",
    remedy={"PA401": "clip in the hook on_before_optimizer_step(self, optimizer), which opt.step() calls after "
                     "MixedPrecision.optimizer_step unscales the gradients; in manual optimization "
                     "self.clip_gradients does not unscale (Lightning #18089)",
            "PA402": "call self.manual_backward(loss), which scales the loss as opt.step() expects"},
)

FABRIC = Framework(
    name="fabric", title="Fabric",
    packages=frozenset({"lightning", "lightning_fabric"}),
    makers=frozenset({"lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric",
                      "lightning.fabric.fabric.Fabric", "lightning_fabric.fabric.Fabric"}),
    precision_keyword="precision", precisions=PRECISIONS, default=None,
    unknown="the Fabric's precision is '16-mixed'",
    apis=apis(
        Api("backward", (SCALED_BACKWARD,),
            "fabric/fabric.py Fabric.backward -> strategy.backward -> fabric/plugins/precision/amp.py "
            "MixedPrecision.backward: scaler.scale(tensor)"),
        Api("clip_gradients", (UNSCALE, CLIP),
            "fabric/fabric.py Fabric.clip_gradients -> fabric/strategies/strategy.py "
            "Strategy.clip_gradients_norm: precision.unscale_gradients(optimizer), then clip_grad_norm_"),
        Api("setup", (PREPARES,), "fabric/fabric.py Fabric.setup: (module, *_FabricOptimizer)"),
        Api("setup_optimizers", (PREPARES,), "fabric/fabric.py Fabric.setup_optimizers: _FabricOptimizer"),
    ),
    optimizer={"step": Api("step", (UNSCALE, STEP, UPDATE),
                           "fabric/wrappers.py _FabricOptimizer.step -> strategy.optimizer_step -> "
                           "MixedPrecision.optimizer_step: scaler.step(optimizer), scaler.update()")},
    names=frozenset({"fabric"}),
    spelled="precision={precision!r}",
    unscales_in="in optimizer.step() (MixedPrecision.optimizer_step: scaler.step unscales)",
    remedy={"PA401": "use fabric.clip_gradients(model, optimizer, max_norm=...), which unscales first "
                     "(Strategy.clip_gradients_norm)",
            "PA402": "call fabric.backward(loss)"},
)


def is_module_class(script, cls) -> bool:
    """Whether the class ``cls`` (an ``ast.ClassDef``) is a LightningModule: one of its
    bases is, however imported, or is a class of this file that is."""
    seen = set()
    stack = [cls]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for base in current.bases:
            if script.names_of(base) & MODULES:
                return True
            local = script.index.classes.get(getattr(base, "id", None))
            if local is not None:
                stack.append(local)
    return False


def manual_optimization(script, cls) -> bool:
    """Whether the LightningModule ``cls`` sets ``self.automatic_optimization = False``
    (or calls ``self.manual_backward``): its ``training_step`` owns the step."""
    import ast

    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is False \
                and any(isinstance(t, ast.Attribute) and t.attr == "automatic_optimization" for t in node.targets):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "manual_backward":
            return True
    return False
