"""PA103 clean twin for pure fp16: the running sum accumulates in fp32."""
import torch
from torch import nn


class Running(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x).cumsum(dim=1, dtype=torch.float32)


def get_model():
    return Running()


def get_example_inputs():
    return (torch.randn(1, 4096, 64),)
