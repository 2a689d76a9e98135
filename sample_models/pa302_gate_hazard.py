"""PA302: gate probabilities that flush to zero in fp16 and then meet a log, only on real data.

A router scores tokens with a linear layer and takes ``log(sigmoid(score))``. Under CUDA
autocast the linear and the sigmoid run in fp16 (sigmoid is on no autocast list: it
keeps its input's dtype); ``log`` is on the fp32 list, but the probabilities reach it
already stored in fp16. A probability below 2.98e-8 (half fp16's smallest subnormal,
score < -17.3) rounds to 0 there, and log(0) = -inf. On the example inputs the scores
stay within +-10: nothing flushes. On real data (calibration_batches(): a few tokens
with large activations, as real hidden states have) scores reach -40 and the fp16 run
ends in inf/NaN. No static rule sees it: log already computes in fp32.

    precisionaudit scan pa302_gate_hazard.py --data calibration_batches
"""
import torch
from torch import nn

D, EXPERTS = 32, 8


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(D, EXPERTS)

    def forward(self, x):
        p = torch.sigmoid(self.score(x))  # fp16 under autocast: p < 2.98e-8 becomes 0
        return torch.log(p)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()
        self.head = nn.Linear(EXPERTS, 4)

    def forward(self, x):
        return self.head(self.gate(x))


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 8, D),)


def calibration_batches(count=4, massive=60.0):
    """Batches like real hidden states: a few tokens carry large activations."""
    generator = torch.Generator().manual_seed(2)
    for _ in range(count):
        x = torch.randn(2, 8, D, generator=generator)
        x[:, 0] *= massive
        yield (x,)
