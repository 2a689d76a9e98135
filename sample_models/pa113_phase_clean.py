"""PA113 clean twin (pure fp16): the positions and the phases stay fp32 and only the sin/cos
table is cast to the activations' dtype, as Hugging Face's rotary embeddings do."""
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
        pos = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
        angles = torch.outer(pos, inv_freq)  # fp32 phases
        return h + torch.cat([angles.sin(), angles.cos()], dim=-1).to(h.dtype)


def get_model():
    return SinusoidalPositions()


def get_example_inputs():
    return (torch.randn(1, 2048, 64),)
