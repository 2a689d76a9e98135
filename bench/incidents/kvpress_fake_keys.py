"""kvpress' masked-key presses on an fp16 model: fake keys of -1e5 * Y / |Y|^2 overflow.

Threads: https://github.com/NVIDIA/kvpress/issues/250 and
https://github.com/NVIDIA/kvpress/issues/268 ("fp16 overflow in
attention_patch.search_hyperplane produces NaN generations"); fixed by
https://github.com/NVIDIA/kvpress/pull/281 and https://github.com/NVIDIA/kvpress/pull/283.
What failed: a press that evicts keys per head writes a "fake key" in their place, one whose
dot product with every query is very negative: ``-1e5 * Y / Y.norm(dim=-1, keepdim=True) ** 2``
with Y the queries' mean direction. In an fp16 model the entries pass 65504, are stored as
+-inf in the key cache, ``q @ k`` mixes +inf and -inf into NaN logits, and generation
degenerates into "!!!!" (token 0).
Upstream fix (PR #283): the hyperplane search runs in fp32 for fp16 queries and the fake
key is rescaled uniformly into fp16's finite range before it is cast back (fixed twin:
``kvpress_fake_keys_fixed.py``).
Target: float16 pure (Qwen3 / Llama-3.2 loaded in ``torch.float16``).
"""
import math

import torch
from torch import nn

D, HEADS, T = 64, 2, 32
HEAD = D // HEADS


def fake_key(queries):
    """kvpress' search_hyperplane, its last line: a key far on the negative side of every query
    (the search iterates until Y separates the queries; their mean does here)."""
    y = queries.mean(dim=-2)
    return -1e5 * y / y.norm(dim=-1, keepdim=True) ** 2


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
