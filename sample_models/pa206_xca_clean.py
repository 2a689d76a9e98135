"""PA206 clean sample (noise before): XCiT's cross-covariance attention (XCA), as timm's
``timm.models.xcit.XCA`` computes it without fused attention. q and k are transposed to
(batch, heads, head_dim, tokens), so ``q @ k^T`` is a head_dim x head_dim (48 x 48) matrix
contracted over the 196 tokens of a 224x224 image: channel x channel attention. Its
contraction is the token count, which the input sets, not a head dim; the model's head dim
(48, a multiple of 8) is the logits' side."""
import torch
import torch.nn.functional as F
from torch import nn


class XCA(nn.Module):
    def __init__(self, dim=384, heads=8):
        super().__init__()
        self.heads = heads
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 4, 1)
        q, k, v = qkv.unbind(0)  # (b, heads, head_dim, n)
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature  # (b, heads, head_dim, head_dim)
        attn = attn.softmax(dim=-1)
        x = attn @ v  # (b, heads, head_dim, n)
        x = x.permute(0, 3, 1, 2).reshape(b, n, c)
        return self.proj(x)


def get_model():
    return XCA()


def get_example_inputs():
    return (torch.randn(2, 196, 384),)  # 14x14 patches of a 224x224 image
