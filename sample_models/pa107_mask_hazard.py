"""PA107 hazard: a -1e9 causal mask on fp16 attention scores, and a 1e-8 epsilon in fp16."""
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
        scores = scores.masked_fill(mask, -1e9)  # -inf in fp16 (and raises on real tensors)
        y = scores.softmax(dim=-1).to(v.dtype) @ v
        return (y / (y.abs().amax(-1, keepdim=True) + 1e-8)).float()  # 1e-8 is 0 in fp16


def get_model():
    return MaskedAttention()


def get_example_inputs():
    return (torch.randn(2, 16, 64),)
