"""PA614 hazard under --dtype nvfp4 --data example: a Linear reads values spread over many
binades within every block (sign(x) * exp(3|x|): a heavy-tailed feature map), so most of each
block's values are below 1/24 of its largest and round to 0."""
import torch
from torch import nn


class SpreadEncoder(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        spread = torch.sign(x) * torch.exp(3 * x.abs())  # every value its own binade
        h = self.proj(spread)
        return h + self.out(self.norm(h))


def get_model():
    torch.manual_seed(0)
    return SpreadEncoder()


def get_example_inputs():
    return (torch.randn(2, 64, 256, generator=torch.Generator().manual_seed(0)),)
