"""PA301: an additive finfo(dtype).min mask that rounds to -inf in fp16 (OPT, transformers #17433).

The mask is built as Hugging Face's OPT built it: ``torch.finfo(scores.dtype).min`` where
the key is padding. A batch of left-padded generation can hold a sequence that is all
padding, whose attention logits are strongly negative. In fp32, ``score + finfo(fp32).min``
is -3.4e38: finite, and the softmax of an all-masked row is uniform. In fp16 it is
``score + (-65504)``, which rounds to -inf once the score is below -16: a row of -inf, and
the softmax makes it NaN, which the next layers carry to the logits. The value exists only
in the fp16 program: the fp32 reference never sees an inf, so a range pass that measures
the fp32 program finds nothing.

    precisionaudit scan pa301_padded_row_hazard.py --data example [--mode pure]
"""
import torch
from torch import nn

D, HEADS = 64, 4
HEAD_DIM = D // HEADS


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D)
        self.o = nn.Linear(D, D)
        with torch.no_grad():  # trained attention: padding tokens repel each other
            self.k.weight.copy_(-self.q.weight)

    def heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)

    def masked(self, scores, keep):
        """The logits with the padding mask added (the clean twin bounds them)."""
        return scores + (1.0 - keep[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min

    def forward(self, x, keep):
        q = self.heads(self.q(x)) * HEAD_DIM ** -0.5
        k, v = self.heads(self.k(x)), self.heads(self.v(x))
        scores = self.masked(q @ k.transpose(-2, -1), keep)
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).flatten(2))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(D, 16)

    def forward(self, x, keep):
        return self.head(x + self.attn(x, keep))


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    """Two sequences; the second is all padding (its tokens: the pad embedding)."""
    torch.manual_seed(1)
    x = torch.randn(2, 8, D)
    x[1] = torch.randn(D, generator=torch.Generator().manual_seed(2)) * 3.0
    keep = torch.ones(2, 8)
    keep[1] = 0.0
    return (x, keep)
