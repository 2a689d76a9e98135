"""xformers' FAVOR+ attention under fp16 AMP: the random-feature normalisation flushes to 0.

Thread: https://github.com/facebookresearch/xformers/issues/96 ("Favor breaks with fp16":
"it's because of the normalization step here, this underflows in fp16"), fixed by
https://github.com/facebookresearch/xformers/pull/98 ("[bugfix] Favor + fp16").
What failed: FAVOR+ approximates softmax(q k^T) by phi(q) (phi(k)^T v) with positive random
features ``phi(x) = exp(w.x - |x|^2/2 - stabiliser) / sqrt(m)``, and divides by the
normaliser ``phi(q) (phi(k)^T 1)``. Under autocast the exp runs in fp32 but both GEMMs run
in fp16: a token whose features are tiny (a large |x|) gets features below fp16's smallest
subnormal, its normaliser rounds to 0, and ``att_raw / att_normalization`` is 0/0 = NaN.
Upstream fix: the whole feature-product block runs with autocast disabled on fp32 copies
of q', k' and v ("keeping this nugget of computations in fp32 is the safest bet";
fixed twin: ``favor_feature_map_fixed.py``).
Target: float16 autocast (microGPT with Lightning ``precision=16``).
"""
import math

import torch
from torch import nn

D, M = 32, 64  # model width, random features


class SoftMaxPositiveEstimator(nn.Module):
    """phi(x) = exp(w.x - |x|^2/2 - max) / sqrt(m), as xformers' SMReg feature map."""

    def __init__(self):
        super().__init__()
        self.register_buffer("features", torch.randn(D, M) / math.sqrt(D))

    def forward(self, x):
        x = x * D ** -0.25
        norm_x_2 = (x * x).sum(-1, keepdim=True) / 2
        proj = x @ self.features.to(x.dtype)
        stabiliser = proj.amax(dim=(-2, -1), keepdim=True)  # one stabiliser for the sequence
        return torch.exp(proj - norm_x_2 - stabiliser) / math.sqrt(M)


class FavorAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.feature_map = SoftMaxPositiveEstimator()

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q_prime, k_prime = self.feature_map(q), self.feature_map(k)
        att_normalization = q_prime @ (k_prime.transpose(-2, -1) @ torch.ones_like(v))
        att_raw = q_prime @ (k_prime.transpose(-2, -1) @ v)
        return att_raw / att_normalization


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = FavorAttention()
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, 8)

    def forward(self, x):
        return self.head(self.norm(x + self.attn(x)))


def get_model():
    return Model()


def get_example_inputs():
    """Most tokens small; a few with a large norm, whose features fall below 6e-8."""
    torch.manual_seed(0)
    x = torch.randn(2, 32, D) * 0.5
    x[:, -4:] = 6.0 * torch.randn(2, 4, D)
    return (x,)
