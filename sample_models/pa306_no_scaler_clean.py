"""PA306 clean twin: the same training with torch.amp.GradScaler (init scale 2^16): the
scaled gradients stay in fp16's range and are unscaled in fp32 before the step.

    precisionaudit check pa306_no_scaler_clean.py --train --dtype float16 --mode autocast
"""
from pa306_no_scaler_hazard import Model, get_loss  # noqa: F401  (the same model and loss)

import torch


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(64, 32),)


def get_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


def get_grad_scaler():
    return torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)  # "cuda" in the real script
