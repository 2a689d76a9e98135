"""PA204 clean twin: a 64x64 projection, one full tile."""
import torch
from torch import nn


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(64, 64)

    def forward(self, x):
        return self.gate(x).float()


def get_model():
    return Router()


def get_example_inputs():
    return (torch.randn(32, 64),)
