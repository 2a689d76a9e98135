"""Tiny values held in fp16 at both sides of a division, and weights a LayerNorm reads.

``small`` (a linear's fp16 result, scaled to ~1e-9 by the input) is the numerator of one
division and the divisor of another; a LayerNorm's weight holds values fp16 cannot hold,
but under autocast the norm reads it in fp32.
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, bias=False)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        small = self.proj(x)
        ratio = small / (x.abs() + 1.0)  # tiny numerator: 0 / y is fine
        inverse = x / small  # tiny divisor: y / 0 is inf
        return self.norm(ratio), inverse


def get_model():
    torch.manual_seed(0)
    return Model()


def state_with_a_huge_norm_weight():
    state = get_model().state_dict()
    state["norm.weight"] = torch.full((4,), 1.0e6)
    return state


def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(3, 4) * 1e-9,)
