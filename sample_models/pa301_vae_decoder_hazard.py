"""PA301: a VAE-decoder-style conv stack whose residual stream passes 65504 in fp16.

Like the SDXL VAE decoder (diffusers ships `force_upcast` for it): the convolutions run in
fp16 under autocast, and with the decoder's trained weights (trained_state_dict(): here,
scaled up) the residual blocks' outputs reach ~1e5 before the GroupNorm brings them back.
With its own init nothing overflows; a static scan sees ordinary fp16 convolutions and
fp32 GroupNorms.
"""
import torch
from torch import nn

C = 32
CONV_SCALE = 400.0


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, C)
        self.conv1 = nn.Conv2d(C, C, 3, padding=1)
        self.conv2 = nn.Conv2d(C, C, 3, padding=1)

    def forward(self, x):
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = self.conv2(nn.functional.silu(h))
        return x + h


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(4, C, 3, padding=1)
        self.up = nn.ModuleList([ResBlock(), ResBlock()])
        self.norm_out = nn.GroupNorm(8, C)
        self.conv_out = nn.Conv2d(C, 8, 3, padding=1)

    def forward(self, z):
        x = self.conv_in(z)
        for block in self.up:
            x = block(x)
        return self.conv_out(nn.functional.silu(self.norm_out(x)))


def get_model():
    torch.manual_seed(0)
    return Decoder()


def trained_state_dict():
    """The "checkpoint": the residual blocks' convolutions with large weights."""
    state = get_model().state_dict()
    for i in range(2):
        for conv in ("conv1", "conv2"):
            state[f"up.{i}.{conv}.weight"] = state[f"up.{i}.{conv}.weight"] * CONV_SCALE
    return state


def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(1, 4, 16, 16),)
