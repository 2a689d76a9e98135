"""A ViT-like stack built the way timm builds one: a drop-path schedule read with .item()
from torch.linspace and trunc_normal_ initialisation (both read tensor values while the
model is built), around two 16384x16384 projections (1 GiB each if allocated)."""
import torch
from torch import nn

WIDTH = 16384


class Block(nn.Module):
    def __init__(self, drop_path):
        super().__init__()
        self.drop_path = drop_path  # a python float, as timm's DropPath takes
        self.norm = nn.LayerNorm(WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        nn.init.trunc_normal_(self.proj.weight, std=0.02)

    def forward(self, x):
        return x + self.proj(self.norm(x))


class Model(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        rates = [x.item() for x in torch.linspace(0, 0.1, depth)]
        self.blocks = nn.Sequential(*[Block(r) for r in rates])

    def forward(self, x):
        return self.blocks(x)


def get_model():
    return Model().eval()


def get_example_inputs():
    return (torch.randn(2, WIDTH),)
