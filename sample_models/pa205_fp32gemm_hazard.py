"""PA205 hazard: a 1024x1024 projection forced to fp32 by a disabled autocast region."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        with torch.autocast("cuda", enabled=False):
            return self.proj(x.float())


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(8, 1024),)
