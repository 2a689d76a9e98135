"""PA112 hazard: an explicit .float() before a matmul that autocast casts back to fp16."""
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.w = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        h = self.proj(x)
        return (h.float() @ self.w).float()  # the matmul still runs in fp16


def get_model():
    return Scorer()


def get_example_inputs():
    return (torch.randn(4, 64),)
