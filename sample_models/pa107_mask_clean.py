"""PA107 clean twin: the mask value and epsilon come from torch.finfo of the scores' dtype."""
import torch
from torch import nn


class MaskedAttention(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        y = scores.softmax(dim=-1).to(v.dtype) @ v
        return (y / (y.abs().amax(-1, keepdim=True) + torch.finfo(y.dtype).eps)).float()


def get_model():
    return MaskedAttention()


def get_example_inputs():
    return (torch.randn(2, 16, 64),)
