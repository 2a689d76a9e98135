"""PA116 clean twin: Gemma's RMSNorm after transformers PR #29402: the scale 1 + weight and
the product are computed in float32 and the result is cast to the model's dtype once."""
import torch
from torch import nn


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        return (output * (1.0 + self.weight.float())).type_as(x)


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.norm = GemmaRMSNorm(d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(self.norm(x)).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 8, 64),)
