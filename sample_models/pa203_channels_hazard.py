"""PA203 hazard: a convolution with 100 output channels (not a multiple of 8)."""
import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1)  # RGB input: info only
        self.body = nn.Conv2d(64, 100, 3, padding=1)

    def forward(self, x):
        return self.body(torch.relu(self.stem(x))).float()


def get_model():
    return ConvNet()


def get_example_inputs():
    return (torch.randn(2, 3, 32, 32),)
