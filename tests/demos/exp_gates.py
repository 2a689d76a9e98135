import torch
from torch import nn


class Gate(nn.Module):
    """A softmax written by hand (no max subtraction)."""

    def __init__(self, temperature):
        super().__init__()
        self.proj = nn.Linear(16, 8)
        self.temperature = temperature

    def forward(self, x):
        scores = torch.exp(self.proj(x) / self.temperature)
        return scores / scores.sum(dim=-1, keepdim=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hot = Gate(0.02)   # logits / 0.02 reach ~50: exp overflows fp16
        self.cool = Gate(50.0)  # logits / 50 stay near 0: flagged, fine on these inputs

    def forward(self, x):
        return (self.hot(x) + self.cool(x)).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(32, 16),)
