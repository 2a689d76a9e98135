"""PA102 hazard in a pure fp16 model: a GroupNorm written by hand, its variance squared in fp16.

(scan with --mode pure) ``(h - mean) ** 2`` is stored in fp16: any deviation above 256
squares past 65504. nn.GroupNorm would keep its statistics in fp32 (group_norm_kernel.cu).
"""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, groups=8):
        super().__init__()
        self.conv = nn.Conv2d(32, 32, 3, padding=1)
        self.groups = groups

    def forward(self, x):
        h = self.conv(x)
        g = h.view(h.shape[0], self.groups, -1)
        c = g - g.mean(-1, keepdim=True)
        var = c.pow(2).mean(-1, keepdim=True)  # fp16 squares
        return (c * torch.rsqrt(var + 1e-5)).view_as(h).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 32, 16, 16),)
