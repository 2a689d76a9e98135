"""PA102 hazard in a pure fp16 model: GroupNorm statistics in fp16 (scan with --mode pure)."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 32, 3, padding=1)
        self.norm = nn.GroupNorm(8, 32)

    def forward(self, x):
        return self.norm(self.conv(x)).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 32, 16, 16),)
