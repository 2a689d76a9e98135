"""PA116 hazard: a Gemma-style RMSNorm before transformers PR #29402. Its weight is an offset
from 1 (initialised to 0); the scale 1 + weight is formed after the cast back to the model's
dtype, so in a bf16 model it is rounded to 2^-7 steps and offsets smaller than that vanish."""
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
        output = self._norm(x.float()).type_as(x)
        return output * (1 + self.weight)


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
