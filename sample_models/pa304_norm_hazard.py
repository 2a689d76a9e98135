"""PA304: a pure-bf16 model under a plain AdamW at lr 1e-4: the RMSNorm gain never moves.

Half an ulp of 1.0 in bf16 is 2^-8 = 0.0039; AdamW's updates are about lr = 1e-4, so every
update to the norm's weight (all 1.0) rounds back to 1.0. The linear layers (GPT-2's init,
|w| ~ 0.02, half an ulp ~ 6e-5) keep most of theirs.

    precisionaudit check pa304_norm_hazard.py --train --dtype bfloat16 --mode pure
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.norm, self.out = nn.Linear(16, 64), nn.RMSNorm(64), nn.Linear(64, 4)
        for layer in (self.inp, self.out):
            nn.init.normal_(layer.weight, std=0.02)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.out(self.norm(self.inp(x)))


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(8, 16),)


def get_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4)
