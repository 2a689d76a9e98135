"""Attention scores masked with -1e9 in fp16: a matmul's output under autocast, or every
tensor in a pure fp16 model. -1e9 does not fit fp16: CUDA refuses the fill. The plan runs
masked_fill in fp32."""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / 32 ** 0.5
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, -1e9)
        return self.out(scores.softmax(-1) @ v)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(32, 8)

    def forward(self, x):
        return self.head(self.attn(x)).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(2, 16, 32),)
