"""PA422 fp16-fsdp-without-sharded-scaler: FSDP computing in float16 with a plain
``GradScaler`` (FSDP1) or with no loss scaler at all.

Why the scaler's class matters, from torch 2.13's source: FSDP1 leaves each rank a shard
of every gradient, and ``torch.amp.GradScaler.unscale_`` looks for inf/NaN in the local
grads only, so ranks decide to skip a step (and back off their scale) on their own.
``ShardedGradScaler.unscale_`` all-reduces ``found_inf`` over the process group (and copies
it back to CPU-offloaded grads) so every rank decides alike. FSDP2 grads are DTensors,
whose dispatcher reduces ``found_inf`` across the mesh itself
(``torch/distributed/tensor/_dispatch.py`` ``found_inf_reduce_handler``): a plain
``GradScaler`` is correct there, and only the no-scaler case applies.
"""
from __future__ import annotations

import ast

from ..fsdp_policy import fsdp_policies, may_use_fsdp_policies
from ..guards import either
from ..registry import TrainingHit, training_check
from ..syntax import PLAIN_SCALERS, SHARDED_SCALERS

#: libraries that make the loss scaler themselves (accelerate makes a ShardedGradScaler for
#: FSDP fp16; Lightning's FSDP precision plugin too; DeepSpeed scales its own loss)
SCALING_FRAMEWORKS = frozenset(("accelerate", "lightning", "pytorch_lightning", "lightning_fabric",
                                "transformers", "deepspeed"))


@training_check("PA422", reads="script")
def fp16_fsdp_scaler(script):
    if not may_use_fsdp_policies(script.text):  # cheap, before any analysis
        return
    fp16 = []
    for policy in fsdp_policies(script):
        if not policy.param or policy.version == 0:  # accelerate's plugin: accelerate scales
            continue
        paths = [p.guard for p in policy.param if p.value == "float16"]
        if paths:
            condition = None if len(paths) == len(policy.param) else either(paths, script.index.flag_atoms)
            fp16.append((policy, condition))
    if not fp16:
        return
    calls = script.index.calls
    if any(script.names_of(c.func) & SHARDED_SCALERS for c in calls):
        return
    plain = [c for c in calls if script.names_of(c.func) & PLAIN_SCALERS]
    fsdp1 = [(p, cond) for p, cond in fp16 if p.version == 1]
    if plain and fsdp1:
        policy, condition = fsdp1[0]
        for scaler in plain:
            line, column = script.line_column(scaler)
            name = script.source(scaler.func).strip()
            yield TrainingHit(
                line, column, case="plain-scaler", condition=condition, subject=name, scope=script.enclosing(scaler),
                values=dict(setting=f"param_dtype=torch.float16 in {policy.api}(...) at line {policy.call.lineno}",
                            problem=f"and {name} unscales them: it checks only this rank's gradient "
                                    "shard for inf/NaN, so ranks skip different steps and their loss "
                                    "scales drift apart",
                            fix_to="use torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler"))
        return
    if plain or _scales_elsewhere(script, calls):
        return
    for policy, condition in fp16:
        line, column = script.line_column(policy.call)
        yield TrainingHit(
            line, column, case="no-scaler", condition=condition, subject=policy.api,
            scope=script.enclosing(policy.call),
            values=dict(setting=f"param_dtype=torch.float16 in {policy.api}(...)",
                        problem="and no loss scaler is made or used in this file: fp16 gradients "
                                "under 3e-8 round to zero and small ones lose their precision",
                        fix_to=("scale the loss with torch.distributed.fsdp.sharded_grad_scaler."
                                "ShardedGradScaler" if policy.version == 1 else
                                "scale the loss with torch.amp.GradScaler (FSDP2 syncs its inf "
                                "checks across ranks), or use param_dtype=torch.bfloat16")))


def _scales_elsewhere(script, calls) -> bool:
    """A scaler made outside this file (``scaler.scale(loss)`` on a parameter) or by a
    library that scales the loss itself."""
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "scale" for c in calls):
        return True
    return bool(script.index.imported & SCALING_FRAMEWORKS)
