"""PA421 clean twin: bf16 compute, fp32 gradient reduction (FSDP1 and FSDP2), and the
policies whose dtypes the file cannot know."""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision as MP
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap_fsdp1(model):
    policy = MP(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    return FSDP(model, mixed_precision=policy)


def wrap_fsdp2(model):
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def wrap_from_config(model, param_dtype, **policy_kwargs):
    # dtypes chosen by the caller: unknown here, so nothing is claimed
    FSDP(model, mixed_precision=MP(param_dtype=param_dtype))
    return MixedPrecisionPolicy(**policy_kwargs)


def full_precision(model):
    return FSDP(model, mixed_precision=MP(param_dtype=torch.float32))
