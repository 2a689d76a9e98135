"""PA305: a pure-fp16 model under AdamW: eps=1e-8 is 0 in fp16, unused embedding rows go NaN.

torch's Adam computes ``(exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`` in the
state's dtype. For the 48 vocabulary rows the batch never uses, gradient, exp_avg and
exp_avg_sq are 0, and 1e-8 rounds to 0 in fp16 (below half its smallest subnormal,
2.98e-8): the update is 0/0 = NaN at the first step. The used rows' exp_avg_sq underflows
too ((1 - 0.999) * g^2 < 6e-8 for every |g| < 7.7e-3): x/0 = inf.

    precisionaudit check pa305_embedding_hazard.py --train --dtype float16 --mode pure
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.out = nn.Embedding(64, 16), nn.Linear(16, 8)

    def forward(self, ids):
        return self.out(self.emb(ids))


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randint(0, 16, (4, 8)),)  # tokens 0-15 of 64


def get_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4)
