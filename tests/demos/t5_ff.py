"""Pure fp16, a T5-style feed-forward whose output projection has large weights (T5's
``wo``, which Hugging Face keeps in fp32: ``_keep_in_fp32_modules``). Its GEMM output
passes 65504; in T5 the layer norm that follows brings it back. The plan keeps ``wo`` in
fp32 with its weights, and the norm's statistics."""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class DenseReluDense(nn.Module):
    def __init__(self, dim=32, ff=128):
        super().__init__()
        self.wi = nn.Linear(dim, ff, bias=False)
        self.wo = nn.Linear(ff, dim, bias=False)
        with torch.no_grad():
            self.wo.weight.mul_(4000.0)  # T5 v1.1: scaled output weights

    def forward(self, x):
        return self.wo(torch.relu(self.wi(x)))


class LayerFF(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.ff = DenseReluDense(dim)
        self.norm = RMSNorm(dim)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(32, 32)
        self.layer = LayerFF()
        self.head = nn.Linear(32, 8)

    def forward(self, x):
        return self.head(self.layer(self.inp(x))).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(8, 32) * 4,)
