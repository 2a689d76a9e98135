"""PA102 clean twin for pure fp16: GroupNorm statistics computed on an fp32 upcast."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 32, 3, padding=1)
        self.norm = nn.GroupNorm(8, 32)

    def forward(self, x):
        h = self.conv(x)
        n = self.norm
        return F.group_norm(h.float(), n.num_groups, n.weight.float(), n.bias.float(), n.eps)


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 32, 16, 16),)
