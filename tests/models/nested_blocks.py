"""Two transformer-ish blocks: module paths, explicit casts and finfo constants under the policy."""
import torch
from torch import nn


class Attn(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        s = (q * 0.125) @ k.transpose(-2, -1)
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), torch.finfo(s.dtype).min)
        return s.softmax(-1).to(v.dtype) @ v


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = Attn(d)

    def forward(self, x):
        return x + self.attn(self.ln(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(2, 16, 64),)
