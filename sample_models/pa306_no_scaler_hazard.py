"""PA306: fp16 autocast without a GradScaler: the small gradients of the backward flush to 0.

The loss is a mean of squares weighted by 1e-4 (one term of a weighted sum, trained here
alone); the gradients reaching the fp16 output of the last linear are about 1e-8, below
fp16's smallest subnormal (6e-8) at loss scale 1, and become 0: most of the first layer's
weight gradient is 0 and it stops learning. The training script makes no GradScaler
(``get_grad_scaler`` returns None).

    precisionaudit check pa306_no_scaler_hazard.py --train --dtype float16 --mode autocast
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 16)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(64, 32),)


def get_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


def get_loss(outputs, inputs):
    return outputs.float().pow(2).mean() * 1e-4


def get_grad_scaler():
    return None  # loss.backward(); optimizer.step(): no loss scaling
