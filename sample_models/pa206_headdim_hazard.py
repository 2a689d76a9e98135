"""PA206 hazard: 4 heads of dim 20 (not a multiple of 8): no fused attention kernel."""
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, d=80, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).float()


def get_model():
    return Attention()


def get_example_inputs():
    return (torch.randn(2, 16, 80),)
