"""PA112 hazard (warning): rotary phases from positions upcast with .float() but multiplied
inside autocast, which runs the matmul in bf16 anyway: positions past 256 are not exact in
bf16 (spacing 2 from 256, 16 at 4096), so the rotations of neighbouring tokens coincide."""
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)
        freqs = positions[:, None].float() @ self.inv_freq[None, :]
        return x * torch.cat([freqs.cos(), freqs.sin()], dim=-1)


def get_model():
    return Rotary()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
