"""PA110 clean twin: positions and angles stay fp32 (RoPE-style, autocast disabled)."""
import torch
from torch import nn


class SinusoidalPositions(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d))

    def forward(self, x):
        h = self.proj(x)
        with torch.autocast("cuda", enabled=False):
            pos = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
            angles = pos[:, None] * self.inv_freq[None, :]
            table = torch.cat([angles.sin(), angles.cos()], dim=-1)
        return h.float() + table


def get_model():
    return SinusoidalPositions()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
