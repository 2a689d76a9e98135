"""PA613 hazard under --dtype nvfp4 --data example: raw features whose scale differs by 10^5
between tokens reach an NVFP4 Linear; the per-tensor scale is the largest token's, and the
blocks of tokens 28672 times smaller get E4M3 scales below E4M3's normal range, or 0."""
import torch
import torch.nn.functional as F
from torch import nn


class FeatureEncoder(nn.Module):
    def __init__(self, d=256, ff=1024):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.down = nn.Linear(ff, d)

    def forward(self, features):
        h = self.proj(features)  # the raw features, as they come
        return h + self.down(F.gelu(self.up(self.norm(h))))


def get_model():
    torch.manual_seed(0)
    return FeatureEncoder()


def get_example_inputs():
    g = torch.Generator().manual_seed(0)
    scale = 10.0 ** torch.linspace(-2.5, 2.5, 64)  # per token: 10^-2.5 .. 10^2.5
    return (torch.randn(2, 64, 256, generator=g) * scale[None, :, None],)
