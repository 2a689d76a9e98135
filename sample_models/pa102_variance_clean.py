"""PA102 clean twin: T5/Llama RMSNorm with an explicit fp32 upcast, BatchNorm and LayerNorm."""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class Net(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.rms = RMSNorm(d)
        self.ln = nn.LayerNorm(d)
        self.bn = nn.BatchNorm1d(d)

    def forward(self, x):
        h = self.proj(x)
        return self.ln(self.bn(self.rms(h))).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(4, 64),)
