"""PA201 hazard: a projection with 100 output features (not a multiple of 8)."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 100)
        self.down = nn.Linear(100, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))).float()


def get_model():
    return MLP()


def get_example_inputs():
    return (torch.randn(4, 64),)
