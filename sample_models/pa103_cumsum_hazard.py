"""PA103 hazard in a pure fp16 model: a cumulative sum over 4096 steps (scan with --mode pure)."""
import torch
from torch import nn


class Running(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x).cumsum(dim=1).float()


def get_model():
    return Running()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
