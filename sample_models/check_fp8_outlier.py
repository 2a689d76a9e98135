"""FP8 check demo: one Linear whose input has an outlier channel.

A small pre-norm transformer (two blocks, width 64). In block 1 one MLP hidden channel carries
a massive activation (gain 1e5, in the manner of the "massive activations" of large LMs,
Sun et al. 2024) that ``blocks.1.mlp.fc2`` does not read (its weight column is 0). In fp32
and bf16 the outlier is harmless. Under FP8 tensorwise scaling the input's one scale is set
by that channel's amax (448 / ~1e5): every other channel lands in E4M3's subnormals (steps
of 2^-9) or flushes to 0, and fc2's output is lost (check: FAILED; keeping fc2 out of FP8
passes). Rowwise scaling does not save it: the channel is in every token's row, so every
row's scale is set by it. MXFP8's 32-wide blocks along K confine the damage to the
outlier's own block of 32 channels: fc2's GEMM keeps far more (about 21 dB of SNR against
8 and 13), still below the 25 dB of a healthy FP8 GEMM (check: fails on that GEMM alone).
Every Linear has K and N divisible by 32, so every one is eligible for FP8.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTH, HEADS, OUTLIER_CHANNEL, OUTLIER_GAIN = 64, 4, 7, 1e5


class Attention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim: int, outlier: bool):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        gain = torch.ones(4 * dim)
        if outlier:
            gain[OUTLIER_CHANNEL] = OUTLIER_GAIN
            with torch.no_grad():
                self.fc2.weight[:, OUTLIER_CHANNEL] = 0.0
        self.register_buffer("gain", gain)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)) * self.gain)


class Block(nn.Module):
    def __init__(self, dim: int, outlier: bool):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim)
        self.mlp = MLP(dim, outlier)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class OutlierStack(nn.Module):
    def __init__(self, dim: int = WIDTH, outputs: int = 32):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, outlier=False), Block(dim, outlier=True)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def get_model():
    return OutlierStack()


def get_example_inputs():
    return (torch.randn(2, 16, WIDTH),)
