"""EX101 (example rule pack) hazard: a gate's sigmoid computes in fp16 under autocast."""
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return x * torch.sigmoid(self.proj(x))


def get_model():
    return Gate()


def get_example_inputs():
    return (torch.randn(4, 64),)
