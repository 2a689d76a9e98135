"""Check demo: a hand-written layer norm whose variance c * c overflows fp16.

The norm sits on the output of a Linear, so under autocast its input is fp16, and
activations above 256 square past fp16's 65504: ``c * c`` and its mean stay fp16 (neither
is on autocast's fp32 list), the variance is inf and the normalised branch collapses to 0.
The plan runs the square and the mean of the norm in fp32.

    precisionaudit plan sample_models/check_variance.py -o amp_plan.yaml
    precisionaudit check sample_models/check_variance.py --plan amp_plan.yaml
"""
import torch
import torch.nn as nn


class HandNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        c = x - x.mean(dim=-1, keepdim=True)
        var = (c * c).mean(dim=-1, keepdim=True)
        return c / torch.sqrt(var + self.eps) * self.weight + self.bias


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)
        self.norm = HandNorm(dim)

    def forward(self, x):
        return self.norm(self.down(torch.relu(self.up(x))))


class Net(nn.Module):
    def __init__(self, dim: int = 128, layers: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(dim) for _ in range(layers)))
        self.out = nn.Linear(dim, 16)

    def forward(self, x):
        return self.out(self.blocks(x)).float()


def get_model():
    return Net()


def get_example_inputs():
    # large activations, as in the outlier features of large transformers
    return (1000 * torch.randn(8, 16, 128),)
