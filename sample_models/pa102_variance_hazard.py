"""PA102 hazard: a hand-written LayerNorm whose variance is c * c in fp16 under autocast."""
import torch
from torch import nn


class HandNorm(nn.Module):
    def __init__(self, d=64, eps=1e-5):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.eps = eps

    def forward(self, x):
        h = self.proj(x)  # fp16 under autocast
        c = h - h.mean(-1, keepdim=True)
        var = (c * c).mean(-1, keepdim=True)  # squares overflow fp16 above 256
        return (c / (var + self.eps).sqrt()).float()


def get_model():
    return HandNorm()


def get_example_inputs():
    return (torch.randn(4, 64),)
