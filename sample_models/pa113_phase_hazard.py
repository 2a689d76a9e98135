"""PA113 hazard (pure fp16, ``model.half()``): sinusoidal positions whose phases are made in
fp16. The 2048 positions themselves are exact in fp16 (PA110 stays silent), but their
product with the frequency table, cast to the activations' dtype with them, is stored in
fp16: phases up to 2047 rad are 1 apart there, so sin/cos are off by up to half a radian."""
import math

import torch
from torch import nn


class SinusoidalPositions(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.d = d
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        h = self.proj(x)
        half = self.d // 2
        inv_freq = torch.exp(-math.log(10000.0) * torch.arange(half, device=x.device, dtype=torch.float32) / half)
        pos = torch.arange(x.shape[1], device=x.device).to(h.dtype)
        angles = torch.outer(pos, inv_freq.to(h.dtype))  # fp16 phases up to 2047
        return h + torch.cat([angles.sin(), angles.cos()], dim=-1)


def get_model():
    return SinusoidalPositions()


def get_example_inputs():
    return (torch.randn(1, 2048, 64),)
