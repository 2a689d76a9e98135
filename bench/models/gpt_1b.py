"""A 24-layer, d=2048 decoder-only transformer (GPT-style, ~1.3 B parameters), written plainly.

Scale benchmark model (bench/scale_bench.py): 24 x 12·d² = 1.21 B in the blocks plus a tied
32768 x 2048 embedding. Built normally (get_model allocates nothing under the scan's fake
tensors). Idiomatic mixed-precision code: pre-scaled queries, masks from finfo(dtype).min.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, D_MODEL, HEADS, FFN, VOCAB, CONTEXT = 24, 2048, 16, 8192, 32768, 2048


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads, self.head_dim = HEADS, D_MODEL // HEADS
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.out = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = (q / math.sqrt(self.head_dim)) @ k.transpose(-1, -2)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores.float(), dim=-1).type_as(v)
        return self.out((weights @ v).transpose(1, 2).reshape(b, t, D_MODEL))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.attn = Attention()
        self.fc, self.proj = nn.Linear(D_MODEL, FFN), nn.Linear(FFN, D_MODEL)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(CONTEXT, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)).float()


def get_model():
    return GPT().eval()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, 1024)),)
