"""PA604 hazard under --dtype float8 --data example: raw features whose scale differs by 10^5
between tokens reach an FP8 Linear; one tensorwise scale leaves the small tokens no mantissa."""
import torch
import torch.nn.functional as F
from torch import nn


class FeatureEncoder(nn.Module):
    def __init__(self, d=1024, ff=4096):
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
    return (torch.randn(2, 64, 1024, generator=g) * scale[None, :, None],)
