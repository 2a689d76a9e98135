"""PA105 hazard in a pure fp16 model: exp of logits overflows above 11.09 (scan with --mode pure)."""
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return torch.exp(self.proj(x)).float()


def get_model():
    return Gate()


def get_example_inputs():
    return (torch.randn(4, 64),)
