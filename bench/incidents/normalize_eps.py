"""An autoencoder RMS norm built on F.normalize, in fp16: eps=1e-12 rounds to 0, 0/0 = NaN.

Thread: https://github.com/huggingface/diffusers/pull/13316 ("Stabilize low-precision custom
autoencoder RMS normalization"): "In low precision, the default eps in F.normalize can
underflow, so zero-norm slices may effectively become 0/0 and produce NaNs", with a
reproduction on CUDA fp16.
What failed: the RMS norms of several diffusers autoencoders (the Wan VAE's
``WanRMS_norm`` pattern: ``F.normalize(x, dim=1) * sqrt(C) * gamma``) run in the VAE's
dtype. ``F.normalize`` divides by ``norm.clamp_min(1e-12)``; in fp16 1e-12 is 0, so a
position whose channels are all 0 (padding, a zeroed region after an activation) divides
0 by 0.
Upstream fix: for fp16/bf16 inputs the normalisation runs on an fp32 copy and is cast
back (fixed twin: ``normalize_eps_fixed.py``).
Target: float16 pure (the VAE loaded with ``torch_dtype=torch.float16``).
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
        return F.normalize(x, dim=1) * self.scale * self.gamma


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
