"""DeepSpeed (``deepspeed.initialize``): the step of a DeepSpeed engine, and its precision
read from the config the script passes (a dict literal, a name bound to one, or a JSON
file named by a string literal next to the script).

Read in DeepSpeed's source (deepspeedai/DeepSpeed, deepspeed/):

- ``deepspeed.initialize(...)`` returns ``(engine, optimizer, training_dataloader,
  lr_scheduler)`` (``__init__.py`` ``initialize``: ``return tuple(return_items)``); the
  config comes from ``config=`` (a dict or a path), ``config_params=`` (older name) or
  ``args.deepspeed_config``.
- ``engine.backward(loss)`` (runtime/engine.py ``DeepSpeedEngine.backward``): under fp16,
  ``self.optimizer.scale_if_loss(loss)`` (ZeRO) or ``FP16_Optimizer.backward``
  (runtime/fp16/fused_optimizer.py: ``scaled_loss = loss.float() * cur_scale``) multiply the
  loss by the dynamic loss scale; the gradients stay scaled.
- ``engine.step()`` -> ``_take_model_step`` -> the optimizer's ``step``
  (``FP16_Optimizer.step``, ZeRO's ``DeepSpeedZeroOptimizer.step``): overflow check,
  ``unscale_and_clip_grads`` (divides by the scale and clips to the config's
  ``gradient_clipping``), the step skipped on inf, ``_update_scale``.
- ``engine.scale(loss).backward()`` is the other scaled backward (``DeepSpeedEngine.scale``);
  a plain ``loss.backward()`` under fp16's dynamic scaling raises "Loss scaling is required
  for this configuration, but backward() was called directly" (``_backward_post_hook``), or
  "Direct calls to tensor.backward() are not supported" where hooks are not installed
  (``_backward_prologue``): loud, so not reported.
- bf16 (``"bf16": {"enabled": true}``) scales nothing (``BF16_Optimizer``).
"""
from __future__ import annotations

import ast
import json
import os

from .table import (CLIP, PREPARES, SCALED_BACKWARD, SCALES_LOSS, STEP, UNSCALE, UPDATE, Api, Framework, Precision,
                    apis)

DEEPSPEED = Framework(
    name="deepspeed", title="DeepSpeed",
    packages=frozenset({"deepspeed"}),
    makers=frozenset({"deepspeed.initialize"}),
    precisions={"fp16": Precision(scales=True), "bf16": Precision(scales=False), "fp32": Precision(scales=False)},
    default=None,
    unknown="the DeepSpeed config enables fp16",
    apis=apis(
        Api("backward", (SCALED_BACKWARD,),
            "runtime/engine.py DeepSpeedEngine.backward: optimizer.scale_if_loss(loss) / "
            "runtime/fp16/fused_optimizer.py FP16_Optimizer.backward: loss.float() * cur_scale"),
        Api("scale", (SCALES_LOSS,),
            "runtime/engine.py DeepSpeedEngine.scale: the loss times the loss scale, for .backward()"),
        Api("step", (UNSCALE, CLIP, STEP, UPDATE),
            "runtime/engine.py DeepSpeedEngine.step -> _take_model_step -> FP16_Optimizer.step / "
            "DeepSpeedZeroOptimizer.step: unscale_and_clip_grads(gradient_clipping), skip on overflow, "
            "_update_scale"),
        Api("initialize", (PREPARES,), "__init__.py initialize: (engine, optimizer, dataloader, lr_scheduler)"),
    ),
    names=frozenset({"model_engine", "engine", "ds_engine", "deepspeed_engine"}),
    spelled="fp16 enabled in the DeepSpeed config",
    refuses_plain_backward=True,
    unscales_in="in engine.step() (unscale_and_clip_grads, which also clips to the config's gradient_clipping)",
    remedy={"PA401": 'remove the clip and set "gradient_clipping": <max_norm> in the DeepSpeed config: '
                     "engine.step() unscales, then clips"},
)

#: the keyword arguments of ``deepspeed.initialize`` that pass the config
CONFIG_KEYWORDS = ("config", "config_params")


def config_precision(script, call: ast.Call):
    """"fp16" / "bf16" / "fp32" as the config ``call`` passes enables it; None when the
    config cannot be read here (``args.deepspeed_config``, a computed dict, "auto")."""
    from ..lookup import dict_literal, strings
    from ..script_configs import literal_value

    given = next((k.value for k in call.keywords if k.arg in CONFIG_KEYWORDS), None)
    if given is None:
        return None
    table = dict_literal(script, given)
    if table is not None:
        return _precision(literal_value(table))
    paths = [p.value for p in strings(script, given) if p.known]
    if len(paths) != 1:
        return None  # a JSON file or none: what does not parse as JSON is unknown
    path = os.path.join(os.path.dirname(os.path.abspath(script.path)), paths[0])
    try:
        with open(path, encoding="utf-8") as fh:
            return _precision(json.load(fh))
    except (OSError, ValueError):
        return None


def _precision(config) -> str | None:
    """The precision a DeepSpeed config enables, as ``DeepSpeedFP16Config`` reads
    ``enabled``; None when a section says something this reading cannot (``"auto"``, a
    computed value)."""
    if not isinstance(config, dict):
        return None
    answers = {}
    for section, name in (("fp16", "fp16"), ("bf16", "bf16"), ("bfloat16", "bf16")):
        value = config.get(section)
        if isinstance(value, dict):
            enabled = value.get("enabled", False)
            if enabled not in (True, False):
                return None
            answers[name] = answers.get(name, False) or enabled
    if answers.get("fp16"):
        return "fp16"
    return "bf16" if answers.get("bf16") else "fp32"
