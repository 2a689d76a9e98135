"""PA107 clean twin: the sentinels written by index assignment are values the scores' dtype holds."""
import torch
from torch import nn


class SentinelScores(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, keep):
        scores = self.proj(x)  # float16 under autocast
        scores[:, 0] = torch.finfo(scores.dtype).max  # the largest value the dtype holds
        scores[0, 1] = 2**10  # fits in fp16
        scores[~keep] = torch.finfo(scores.dtype).min
        return scores.softmax(dim=-1).float()


def get_model():
    return SentinelScores()


def get_example_inputs():
    keep = torch.ones(4, 64, dtype=torch.bool)
    keep[:, 32:] = False
    return (torch.randn(4, 64), keep)
