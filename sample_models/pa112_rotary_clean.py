"""PA112 clean twin: the same rotary phases computed with autocast disabled (as transformers'
Llama rotary embedding does), so the fp32 positions reach an fp32 matmul."""
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)
        with torch.autocast("cuda", enabled=False):
            freqs = positions[:, None].float() @ self.inv_freq[None, :]
        return x * torch.cat([freqs.cos(), freqs.sin()], dim=-1)


def get_model():
    return Rotary()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
