"""PA206 hazard: 4 heads of dim 20 (not a multiple of 8), masked by the batch's padding.

On CUDA, SDPA's memory-efficient and cuDNN kernels need head dims that are multiples of 8,
and flash attention (which would pad 20 to 24) takes no attention mask: with the padding
mask, every fused kernel is out and SDPA runs its unfused math path (the whole logits matrix
in memory). Without a mask the call would be an info: flash attention runs it padded."""
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, d=80, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x, keep):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = keep[:, None, None, :]  # key padding: (batch, 1, 1, keys)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).float()


def get_model():
    return Attention()


def get_example_inputs():
    keep = torch.ones(2, 16, dtype=torch.bool)
    keep[1, 12:] = False  # the second sequence is padded
    return (torch.randn(2, 16, 80), keep)
