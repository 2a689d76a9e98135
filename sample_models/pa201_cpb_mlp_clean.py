"""PA201 clean sample (noise before): a Swin-v2 block (stage 3 of Swin-v2-T: dim 384, 12
heads, window 8) with its continuous position bias MLP, ``cpb_mlp`` = Linear(2, 512) -> ReLU
-> Linear(512, 12 heads), as transformers' ``Swinv2SelfAttention`` and timm build it. The
MLP's 12 outputs are not a multiple of 8, but it runs once per block on the (2*8-1)^2 = 225
relative coordinates: about 0.3% of the block's GEMM work, so padding it cannot buy a
measurable speed-up. The block's real GEMMs (qkv, proj, MLP) are aligned."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, dim=384, heads=12, window=8):
        super().__init__()
        self.heads, self.window = heads, window
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(heads, 1, 1)))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, heads, bias=False))
        coords = torch.arange(-(window - 1), window, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(coords, coords, indexing="ij")).permute(1, 2, 0)[None]
        table = table / (window - 1) * 8
        table = torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)
        self.register_buffer("relative_coords_table", table, persistent=False)
        grid = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (grid[:, :, None] - grid[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("relative_position_index", rel[..., 0] * (2 * window - 1) + rel[..., 1],
                             persistent=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        bias_table = self.cpb_mlp(self.relative_coords_table).view(-1, self.heads)
        bias = bias_table[self.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        attn = attn + 16 * torch.sigmoid(bias).unsqueeze(0)
        x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Swinv2Block(nn.Module):
    def __init__(self, dim=384):
        super().__init__()
        self.attention = WindowAttention(dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.norm1(self.attention(x))  # Swin-v2's post-norm
        return x + self.norm2(self.mlp(x))


def get_model():
    return Swinv2Block()


def get_example_inputs():
    return (torch.randn(4, 64, 384),)  # a 16x16 stage-3 map (a 256x256 image): 4 windows of 8x8
