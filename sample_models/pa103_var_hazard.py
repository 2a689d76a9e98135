"""PA103 hazard: torch.var of a linear's fp16 output under autocast (var is on no autocast list)."""
import torch
from torch import nn


class Stats(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        h = self.proj(x)
        return torch.var(h, dim=-1).float()


def get_model():
    return Stats()


def get_example_inputs():
    return (torch.randn(8, 256),)
