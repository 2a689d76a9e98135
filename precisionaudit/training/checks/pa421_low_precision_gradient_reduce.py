"""PA421 low-precision-gradient-reduce: gradients summed across data-parallel ranks (or
accumulated across micro-steps) in bf16/fp16.

Script: an FSDP ``MixedPrecision`` / FSDP2 ``MixedPrecisionPolicy`` whose reduce dtype is
low, explicitly or because it is unset and follows a low ``param_dtype`` (both FSDP1's
``FlatParamHandle._init_param_reduce_dtypes`` and FSDP2's ``foreach_reduce`` do that).
DeepSpeed JSON (or a dict literal of a script): ``communication_data_type`` or ``data_types.grad_accum_dtype`` set to
fp16/bf16; "auto" (the HF integration fills it in) is unknown and stays silent.
"""
from __future__ import annotations

from ..fsdp_policy import fsdp_policies, may_use_fsdp_policies
from ..guards import combine, either
from ..registry import TrainingHit, training_check
from ..script_configs import deepspeed_dicts
from ..syntax import LOW_DTYPES

_TORCH = {"float16": "torch.float16", "bfloat16": "torch.bfloat16"}
_REDUCED = dict(what="reduced across data-parallel ranks", over="ranks")


@training_check("PA421", reads="script")
def script_reduce(script):
    """FSDP policies, and DeepSpeed configs written as dict literals."""
    yield from fsdp_reduce(script)
    for config in deepspeed_dicts(script):
        yield from deepspeed_reduce(config)


def fsdp_reduce(script):
    if not may_use_fsdp_policies(script.text):  # cheap, before any analysis
        return
    for policy in fsdp_policies(script):
        if policy.param is None or policy.reduce is None:
            continue
        paths = combine(policy.param, policy.reduce)
        low = [(dtype, setting, guard) for (param, reduce), guard in paths
               for dtype, setting in [_reduced_in(param.value, reduce.value)] if dtype in LOW_DTYPES]
        if not low:
            continue
        dtype, setting, _ = low[0]
        condition = None if len(low) == len(paths) else either([g for _, _, g in low], script.index.flag_atoms)
        line, column = script.line_column(policy.call)
        fix_to = (f"pass reduce_dtype=torch.float32 to {policy.api}(...): compute stays in low "
                  "precision, gradients are summed in fp32")
        if policy.written is not None:  # accelerate's plugin
            setting = policy.written
            fix_to = (f'mixed_precision_policy={{"param_dtype": ..., "reduce_dtype": torch.float32, '
                      f'...}} in {policy.api}(...), or a MixedPrecision with reduce_dtype=torch.float32')
        yield TrainingHit(
            line, column, condition=condition, subject=policy.api, scope=script.enclosing(policy.call),
            values=dict(_REDUCED, dtype=dtype, setting=setting, fix_to=fix_to))


def _reduced_in(param: str | None, reduce: str | None) -> tuple[str | None, str]:
    """(the dtype FSDP reduces gradients in, the setting that makes it so); None: the
    parameters' own dtype (fp32 for a model built in fp32)."""
    if reduce is not None:
        return reduce, f"reduce_dtype={_TORCH.get(reduce, reduce)}"
    if param is not None:
        return param, f"reduce_dtype unset, so it follows param_dtype={_TORCH.get(param, param)}"
    return None, ""


#: DeepSpeed's spellings: communication_data_type is lower-cased and must be fp16/bf16/fp32
#: (runtime/config.py get_communication_data_type); grad_accum_dtype goes through DtypeEnum
#: (runtime/config.py), which takes these strings exactly
_COMM = {"fp16": "float16", "bf16": "bfloat16"}
_ACCUM = {"fp16": "float16", "float16": "float16", "half": "float16", "torch.float16": "float16",
          "bf16": "bfloat16", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16"}


@training_check("PA421", reads="deepspeed")
def deepspeed_reduce(config):
    comm = config.get("communication_data_type")
    if isinstance(comm, str) and comm.lower() in _COMM:
        line, column = config.position("communication_data_type")
        yield TrainingHit(line, column, scope="communication_data_type", subject="communication_data_type",
                          values=dict(_REDUCED, dtype=_COMM[comm.lower()],
                                      setting=f'"communication_data_type": "{comm}"',
                                      fix_to='"communication_data_type": "fp32"'))
    data_types = config.get("data_types")
    accum = data_types.get("grad_accum_dtype") if isinstance(data_types, dict) else None
    if isinstance(accum, str) and accum in _ACCUM:
        line, column = config.position("data_types", "grad_accum_dtype")
        yield TrainingHit(line, column, scope="data_types", subject="data_types.grad_accum_dtype",
                          values=dict(what="accumulated across micro-steps", over="micro-steps",
                                      dtype=_ACCUM[accum], setting=f'"grad_accum_dtype": "{accum}"',
                                      fix_to='"data_types": {"grad_accum_dtype": "fp32"}'))
