"""PA102 clean twin for pure fp16: nn.GroupNorm, whose CUDA kernel keeps mean and variance in fp32.

group_norm_kernel.cu computes the statistics in ``T_ACC = acc_type<T, true>`` (float for
Half), so a .half() GroupNorm is not a hazard by itself.
"""
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
