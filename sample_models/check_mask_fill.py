"""Check demo: a causal mask filled with -1e9 under autocast fp16.

The attention scores are fp16 under autocast (a matmul's output), and -1e9 does not fit
in fp16: on real tensors ``masked_fill`` raises "value cannot be converted to type
at::Half without overflow" (CUDA and CPU alike). The plan runs ``masked_fill`` in fp32
inside each attention module; every GEMM stays in fp16.

    precisionaudit plan sample_models/check_mask_fill.py -o amp_plan.yaml
    precisionaudit check sample_models/check_mask_fill.py --plan amp_plan.yaml
"""
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q = q / math.sqrt(d // self.heads)
        scores = q @ k.transpose(-2, -1)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, -1e9)
        attn = scores.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)).float()


def get_model():
    return TinyGPT()


def get_example_inputs():
    return (torch.randint(0, 512, (2, 32)),)
