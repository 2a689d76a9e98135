"""PA204 hazard: a 16x8 gate projection, far below a Tensor Core tile."""
import torch
from torch import nn


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8)

    def forward(self, x):
        return self.gate(x).float()


def get_model():
    return Router()


def get_example_inputs():
    return (torch.randn(32, 16),)
