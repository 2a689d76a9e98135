"""PA106 hazard: q is pre-scaled by only d**-0.25; the other d**-0.25 comes after the matmul,
so the fp16 logits it stores are still d**0.25 (~2.8 for d=64) times the final ones."""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d=128, heads=2):
        super().__init__()
        self.heads = heads
        self.quarter = (d // heads) ** -0.25  # half of 1/sqrt(head_dim), in log terms
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = ((q * self.quarter) @ k.transpose(-2, -1)) * self.quarter
        attn = scores.softmax(dim=-1)
        return self.out((attn @ v).transpose(1, 2).reshape(b, t, d)).float()


def get_model():
    return Attention()


def get_example_inputs():
    return (torch.randn(2, 32, 128),)
