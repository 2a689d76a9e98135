"""PA110 hazard: 4096 positions cast to the activations' fp16 dtype (exact only to 2048)."""
import torch
from torch import nn


class SinusoidalPositions(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d))

    def forward(self, x):
        h = self.proj(x)
        pos = torch.arange(x.shape[1], device=x.device).to(h.dtype)  # fp16 under autocast
        angles = pos[:, None] * self.inv_freq.to(h.dtype)[None, :]
        return (h + torch.cat([angles.sin(), angles.cos()], dim=-1)).float()


def get_model():
    return SinusoidalPositions()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
