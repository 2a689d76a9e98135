"""Fixed twin of ``normalize_eps.py``: the upstream fix of
https://github.com/huggingface/diffusers/pull/13316: fp16/bf16 inputs are normalised on an
fp32 copy (where eps=1e-12 is not 0) and the result is cast back.
"""
import torch
from torch import nn
from torch.nn import functional as F

C = 16


class RMSNorm2d(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(dim, 1, 1))

    def forward(self, x):
        norm_input = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # the fix
        return F.normalize(norm_input, dim=1).to(x.dtype) * self.scale * self.gamma


class DecoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RMSNorm2d(C)
        self.conv = nn.Conv2d(C, C, 3, padding=1)

    def forward(self, x):
        return x + self.conv(F.silu(self.norm(x)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(4, C, 3, padding=1, bias=False)
        self.block = DecoderBlock()
        self.conv_out = nn.Conv2d(C, 3, 3, padding=1)

    def forward(self, z):
        return self.conv_out(self.block(self.conv_in(z))).float()


def get_model():
    return Decoder()


def get_example_inputs():
    """A latent with a zero-padded border: conv_in (no bias) keeps the inner padding at 0."""
    torch.manual_seed(0)
    z = torch.zeros(1, 4, 16, 16)
    z[:, :, :, :8] = torch.randn(1, 4, 16, 8)
    return (z,)
