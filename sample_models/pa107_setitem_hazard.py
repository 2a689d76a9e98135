"""PA107 hazard: Python constants written by index assignment into fp16 tensors.

torch turns the number into a tensor of the destination's dtype before any kernel runs:
2**30 and 1e9 are inf in fp16, -1e9 is -inf (a fully masked row then gives NaN).
"""
import torch
from torch import nn


class SentinelScores(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, keep):
        scores = self.proj(x)  # float16 under autocast
        scores[:, 0] = 1e9  # a "always attend" sentinel: inf in fp16
        scores[0, 1] = 2**30  # inf in fp16
        scores[~keep] = -1e9  # -inf in fp16
        return scores.softmax(dim=-1).float()


def get_model():
    return SentinelScores()


def get_example_inputs():
    keep = torch.ones(4, 64, dtype=torch.bool)
    keep[:, 32:] = False
    return (torch.randn(4, 64), keep)
