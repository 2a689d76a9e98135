"""Check demo: a model with no precision hazard; its plan is empty and the check passes."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dim: int = 128, classes: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim),
                                 nn.LayerNorm(dim), nn.Linear(dim, classes))

    def forward(self, x):
        return self.net(x).float()


def get_model():
    return MLP()


def get_example_inputs():
    return (torch.randn(32, 128),)
