"""PA113 clean twin (bf16 autocast): the [0, 1] timestep stays fp32 through the x1000 and the
sinusoidal embedding; only the embedding's MLP runs in bf16 (autocast casts its input)."""
import math

import torch
from torch import nn


def timestep_embedding(timesteps, dim=64, max_period=10000):
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32, device=timesteps.device) / half
    args = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepConditioned(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.x_embedder = nn.Linear(d, d)
        self.time_mlp = nn.Linear(d, d)

    def forward(self, hidden_states, timestep):
        hidden_states = self.x_embedder(hidden_states)
        timestep = timestep.float() * 1000
        temb = self.time_mlp(timestep_embedding(timestep))
        return (hidden_states + temb[:, None, :]).float()


def get_model():
    return TimestepConditioned()


def get_example_inputs():
    return (torch.randn(2, 16, 64), torch.rand(2))  # t in [0, 1], as Flux's scheduler gives it
