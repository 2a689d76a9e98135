"""PA301 hazard (a headroom warning): OPT's attention without the bound of transformers
PR #17437 (the fix of #17433), in a pure fp16 model.

The mask is OPT's: a causal mask of ``finfo(dtype).min`` above the diagonal plus the padding
mask, both built in the model's dtype. The logits get it added: -65504 plus a score, which
the example's scores keep within fp16 (65470 at most) but a score below -16 turns into
-inf, and a row of them into NaN after the softmax. pa301_opt_clamped_clean.py is the fix.

    precisionaudit scan pa301_opt_clamped_hazard.py --data example --mode pure
"""
import torch
from torch import nn

D, HEADS = 64, 4
HEAD_DIM = D // HEADS


def causal_mask(t, dtype):
    """OPT's _make_causal_mask: finfo(dtype).min above the diagonal, 0 on and below it."""
    mask = torch.full((t, t), torch.finfo(dtype).min)
    cond = torch.arange(t)
    mask.masked_fill_(cond < (cond + 1).view(t, 1), 0)
    return mask.to(dtype)[None, None]


def padding_mask(keep, dtype):
    """OPT's _expand_mask: finfo(dtype).min where the key is padding."""
    inverted = 1.0 - keep[:, None, None, :].to(dtype)
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

    def heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)

    def bounded(self, attn_weights):
        """The logits as the softmax gets them (the clean twin bounds them below)."""
        return attn_weights

    def forward(self, x, keep):
        dtype = x.dtype
        q = self.heads(self.q(x)) * HEAD_DIM ** -0.5
        k, v = self.heads(self.k(x)), self.heads(self.v(x))
        mask = padding_mask(keep, dtype) + causal_mask(x.shape[1], dtype)
        attn_weights = self.bounded(q @ k.transpose(-2, -1) + mask)
        if attn_weights.dtype == torch.float16:
            probs = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(torch.float16)
        else:
            probs = nn.functional.softmax(attn_weights, dim=-1)
        return self.o((probs @ v).transpose(1, 2).flatten(2))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.head = nn.Linear(D, 16)

    def forward(self, x, keep):
        return self.head(x + self.attn(x, keep)).float()


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    """Two sequences; the second is left-padded (its first three tokens)."""
    torch.manual_seed(1)
    keep = torch.ones(2, 8)
    keep[1, :3] = 0.0
    return (torch.randn(2, 8, D) * 4.0, keep)
