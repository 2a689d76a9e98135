"""PA301 clean: attention that branches on the dtype and picks values its fp16 program can hold.

Three idioms real models use (Hugging Face's older BERT/GPT-2 masks, T5's fp16 clamp):
- ``neg = -1e4 if scores.dtype == torch.float16 else -1e30``: the masked logits hold -1e4
  in the fp16 program; only the fp32 program writes -1e30;
- an additive mask of ``torch.finfo(self.dtype).min``, where ``self.dtype`` follows the
  model's dtype (fp16's min under ``.half()``, fp32's under autocast);
- ``if h.dtype == torch.float16: h = h.clamp(...)``: a clamp only the fp16 program runs.
No value the fp16 program computes comes near 65504 and check passes: a scan that measures
the fp32 program (-1e30) and calls it an overflow in fp16 is wrong.

    precisionaudit scan pa301_dtype_branch_clean.py --data example [--mode pure]
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

    @property
    def dtype(self):
        return self.q.weight.dtype

    def heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)

    def forward(self, x, padded):
        q = self.heads(self.q(x)) * HEAD_DIM ** -0.5
        k, v = self.heads(self.k(x)), self.heads(self.v(x))
        scores = q @ k.transpose(-2, -1)
        neg = -1e4 if scores.dtype == torch.float16 else -1e30
        scores = scores.masked_fill(padded[:, None, None, :], neg)
        bias = padded[:, None, None, :].to(self.dtype) * torch.finfo(self.dtype).min
        scores = scores + bias
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).flatten(2))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(D, 16)

    def forward(self, x, padded):
        h = x + self.attn(x, padded)
        if h.dtype == torch.float16:
            limit = torch.finfo(h.dtype).max - 1000
            h = h.clamp(-limit, limit)
        return self.head(h)


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    """Two sequences; the second has its last three tokens padded (no row is all padding)."""
    torch.manual_seed(1)
    padded = torch.zeros(2, 8, dtype=torch.bool)
    padded[1, 5:] = True
    return (torch.randn(2, 8, D), padded)
