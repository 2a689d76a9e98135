"""PA305 clean twin: the same model, its optimizer's state in fp32 (fp32 master weights).

    precisionaudit check pa305_embedding_clean.py --train --dtype float16 --mode pure
"""
from pa305_embedding_hazard import Model  # noqa: F401  (the same model)
from train_master_adamw import MasterAdamW

import torch


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randint(0, 16, (4, 8)),)


def get_optimizer(params):
    return MasterAdamW(params, lr=1e-4)
