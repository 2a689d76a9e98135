"""PA104 hazard: a hand-written linear recurrence h = a * h + u over 256 steps (a gated
linear RNN / state-space scan written as a loop). Under CUDA autocast the gate and input
come from linears in fp16, so the state is rounded to fp16 at every step."""
import torch
from torch import nn


class GatedScan(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.gate = nn.Linear(d, d)
        self.inp = nn.Linear(d, d)

    def forward(self, x):
        a = torch.sigmoid(self.gate(x))
        u = self.inp(x)
        h = torch.zeros_like(u[:, 0])
        for t in range(x.shape[1]):
            h = a[:, t] * h + u[:, t]
        return h.float()


def get_model():
    return GatedScan()


def get_example_inputs():
    return (torch.randn(2, 256, 64),)
