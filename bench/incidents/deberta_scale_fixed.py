"""Fixed twin of ``deberta_scale.py``: the upstream fix of
https://github.com/huggingface/transformers/pull/24116 (microsoft/DeBERTa#77): the key is
divided by ``sqrt(head_dim * scale_factor)`` before the bmm, so the fp16 scores stay in range.
"""
import math

import torch
from torch import nn

D, HEADS, SCALE_FACTOR = 64, 1, 3  # c2p and p2c: scale_factor = 1 + len(pos_att_type)


class DisentangledSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_proj = nn.Linear(D, D)
        self.key_proj = nn.Linear(D, D)
        self.value_proj = nn.Linear(D, D)
        with torch.no_grad():  # trained mDeBERTa: query/key follow the (large) hidden states
            for proj in (self.query_proj, self.key_proj):
                proj.weight.copy_(torch.eye(D) + 0.01 * proj.weight)
                proj.bias.zero_()

    def forward(self, hidden_states):
        q, k, v = self.query_proj(hidden_states), self.key_proj(hidden_states), self.value_proj(hidden_states)
        scale = math.sqrt(q.size(-1) * SCALE_FACTOR)
        scores = torch.bmm(q, k.transpose(-1, -2) / scale)  # the fix: scale before the GEMM
        probs = nn.functional.softmax(scores, dim=-1)
        return torch.bmm(probs, v)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = DisentangledSelfAttention()
        self.norm = nn.LayerNorm(D)

    def forward(self, x):
        return self.norm(x + self.attention(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()
        self.classifier = nn.Linear(D, 4)

    def forward(self, x):
        return self.classifier(self.layer(x)[:, 0])


def get_model():
    return Model()


def get_example_inputs():
    """Hidden states of mDeBERTa's size: |x| ~ 40 on some tokens, so q.k reaches ~1e5."""
    torch.manual_seed(0)
    x = torch.randn(2, 16, D)
    x[:, :4] = 40.0 + torch.rand(2, 4, D)
    return (x,)
