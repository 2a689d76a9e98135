"""Fixed twin of ``kvpress_fake_keys.py``: the upstream fix of
https://github.com/NVIDIA/kvpress/pull/283 (issues #250, #268): the fake key is computed in
fp32 and rescaled uniformly into the fp16 range (0.9 x finfo.max) before it is cast back.
"""
import math

import torch
from torch import nn

D, HEADS, T = 64, 2, 32
HEAD = D // HEADS


def fake_key(queries):
    """kvpress' search_hyperplane, its last line: a key far on the negative side of every query
    (the search iterates until Y separates the queries; their mean does here)."""
    y = queries.float().mean(dim=-2)  # the fix: search in fp32 ...
    k = -1e5 * y / y.norm(dim=-1, keepdim=True) ** 2
    finfo = torch.finfo(queries.dtype)  # ... and rescale into the cache dtype's finite range
    scale = (0.9 * finfo.max / k.abs().amax(dim=-1, keepdim=True)).clamp(max=1.0)
    return (k * scale).to(queries.dtype)


class PressedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D, D)
        with torch.no_grad():  # queries close to one direction, whose mean Y separates them all:
            self.q_proj.weight.mul_(0.08)  # |Y| is small, so -1e5 * Y / |Y|^2 is large
            self.q_proj.bias.fill_(0.03)
        self.k_proj = nn.Linear(D, D, bias=False)
        self.v_proj = nn.Linear(D, D, bias=False)
        self.o_proj = nn.Linear(D, D, bias=False)
        evicted = torch.zeros(HEADS, T, dtype=torch.bool)
        evicted[0, 3:9] = True  # the press evicted these positions in head 0
        self.register_buffer("masked_key_indices", evicted)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, HEADS, HEAD).transpose(1, 2)
        k = self.k_proj(x).view(b, t, HEADS, HEAD).transpose(1, 2)
        v = self.v_proj(x).view(b, t, HEADS, HEAD).transpose(1, 2)
        fake = fake_key(q).unsqueeze(-2).expand_as(k)
        k = torch.where(self.masked_key_indices[None, :, :t, None], fake, k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj((probs @ v).transpose(1, 2).reshape(b, t, D))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, D)
        self.attn = PressedAttention()
        self.norm = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, 100, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        return self.lm_head(self.norm(h + self.attn(h))).float()


def get_model():
    return Model()


def get_example_inputs():
    torch.manual_seed(0)
    return (torch.randint(0, 100, (1, T)),)
