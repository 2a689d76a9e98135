"""Control flow on a tensor's value: fake tensors cannot decide it, an eager run can."""
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > -1e30:
            h = self.b(h)
        return h.exp().float()


def get_model():
    return Gated()


def get_example_inputs():
    return (torch.randn(4, 64),)
