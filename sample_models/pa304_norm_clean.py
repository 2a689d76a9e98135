"""PA304 clean twin: the same model, its optimizer stepping fp32 master weights.

The bf16 norm weight is the rounding of an fp32 master that does move: the updates are
kept until they add up to an ulp.

    precisionaudit check pa304_norm_clean.py --train --dtype bfloat16 --mode pure
"""
from pa304_norm_hazard import Model  # noqa: F401  (the same model)
from train_master_adamw import MasterAdamW

import torch


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(8, 16),)


def get_optimizer(params):
    return MasterAdamW(params, lr=1e-4)
