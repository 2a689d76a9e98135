"""PA301: attention logits that pass 65504 in fp16 only on real data.

The query is scaled before the matmul, so the static PA106 rule is satisfied, and on the
example inputs (unit-scale activations) every logit is small. Real text has massive
activations: a few tokens (the first one, punctuation) carry features in the thousands
(Sun et al., 2024, "Massive Activations in Large Language Models"). On such batches
(calibration_batches()) q.k reaches ~1e5: inf in fp16, NaN after the softmax.

    precisionaudit scan pa301_attention_hazard.py --data calibration_batches
"""
import torch
from torch import nn

D, HEADS = 64, 4
HEAD_DIM = D // HEADS


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D)
        self.k = nn.Linear(D, D)
        self.v = nn.Linear(D, D)
        self.o = nn.Linear(D, D)

    def heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)

    def forward(self, x):
        q = self.heads(self.q(x)) * HEAD_DIM ** -0.5
        k, v = self.heads(self.k(x)), self.heads(self.v(x))
        scores = q @ k.transpose(-2, -1)
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).flatten(2))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(D, 16)

    def forward(self, x):
        return self.head(x + self.attn(x))


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 8, D),)


def calibration_batches(count=4, massive=4000.0):
    """Batches like real hidden states: the first token carries a massive activation."""
    generator = torch.Generator().manual_seed(2)
    for _ in range(count):
        x = torch.randn(2, 8, D, generator=generator)
        x[:, 0, 7] = massive
        yield (x,)


def near_miss_batches():
    """Smaller massive activations: the logits reach ~5e4, within a factor 2 of 65504."""
    return calibration_batches(massive=2500.0)
