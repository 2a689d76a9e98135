"""PA205 clean twin: the projection runs in fp16 under autocast; only the output is upcast."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(8, 1024),)
