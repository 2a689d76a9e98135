"""PA114 hazard: a finfo.min additive mask built in the scores' fp16, added to the scores.

-65504 + s is -inf in fp16 for every score s < -16. The first query of a left-padded
sequence (batched generation) sees only padding: every entry of its row can end -inf, and
softmax of it is NaN.
"""
import torch
from torch import nn


def additive_mask(keep, dtype):
    """0 where a query may attend to a key (causal, not padding), the dtype's most negative
    value elsewhere."""
    t = keep.shape[1]
    allowed = keep[:, None, None, :] & torch.ones(t, t, dtype=torch.bool).tril()
    return torch.where(allowed, torch.zeros((), dtype=dtype), torch.finfo(dtype).min)


class PaddedAttention(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, keep):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q * (d // self.heads) ** -0.5) @ k.transpose(-2, -1)  # float16 under autocast
        scores = scores + additive_mask(keep, scores.dtype)  # float16 + float16 mask: -inf below -65520
        y = scores.softmax(dim=-1).to(v.dtype) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d)).float()


def get_model():
    return PaddedAttention()


def get_example_inputs():
    keep = torch.ones(2, 16, dtype=torch.bool)
    keep[1, 11:] = False  # the second sequence ends in 5 pad tokens
    return (torch.randn(2, 16, 64), keep)
