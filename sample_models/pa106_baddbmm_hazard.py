"""PA106 hazard: baddbmm with alpha=1 stores the unscaled q.k in fp16 (with a position bias
added); the 1/sqrt(d) comes only after it."""
import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d=128, heads=2, length=32):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.bias = nn.Parameter(torch.zeros(heads, length, length))

    def forward(self, x):
        b, t, d = x.shape
        h = d // self.heads
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h).permute(2, 0, 3, 1, 4).reshape(3, b * self.heads, t, h)
        bias = self.bias[:, :t, :t].repeat(b, 1, 1)
        scores = torch.baddbmm(bias, q, k.transpose(-2, -1)) / math.sqrt(h)
        attn = scores.softmax(dim=-1)
        y = torch.bmm(attn.to(v.dtype), v).view(b, self.heads, t, h)
        return self.out(y.transpose(1, 2).reshape(b, t, d)).float()


def get_model():
    return Attention()


def get_example_inputs():
    return (torch.randn(2, 32, 128),)
