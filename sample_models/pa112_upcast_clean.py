"""PA112 clean twin: the fp32 matmul runs with autocast disabled, so the upcast holds."""
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.w = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        h = self.proj(x)
        with torch.autocast("cuda", enabled=False):
            return h.float() @ self.w


def get_model():
    return Scorer()


def get_example_inputs():
    return (torch.randn(4, 64),)
