"""A model that reads its own initialised weights while it is built: they must be real."""
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.scale = 1.0 / self.proj.weight.abs().max().item()  # a value, not a shape

    def forward(self, x):
        return self.proj(x) * self.scale


def get_model():
    return Scaled()


def get_example_inputs():
    return (torch.randn(4, 64),)
