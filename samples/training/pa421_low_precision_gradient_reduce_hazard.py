"""PA421 hazard: FSDP gradients reduced in bf16.

The setup of pytorch/pytorch#106395: bf16 compute through autocast, FSDP with
reduce_dtype=torch.bfloat16; stable on 12x8 GPUs, unstable on 48x8. Then the FSDP2 form,
where an unset reduce_dtype follows param_dtype, and a flag-chosen dtype.
"""
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision as MP
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

LOW = torch.bfloat16


def wrap_fsdp1(model):
    policy = MP(param_dtype=None, reduce_dtype=torch.bfloat16)  # PA421
    return FSDP(model, mixed_precision=policy)


def wrap_fsdp2(model):
    for layer in model.layers:
        fully_shard(layer, mp_policy=MixedPrecisionPolicy(param_dtype=LOW))  # PA421
    fully_shard(model)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    # reduce_dtype unset follows param_dtype, bf16 when --bf16 is set
    policy = torch.distributed.fsdp.MixedPrecision(param_dtype=dtype)  # PA421 when --bf16 is set
    return policy
