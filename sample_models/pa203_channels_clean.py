"""PA203 clean twin: every conv channel count is a multiple of 8."""
import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(8, 64, 3, padding=1)
        self.body = nn.Conv2d(64, 96, 3, padding=1)

    def forward(self, x):
        return self.body(torch.relu(self.stem(x))).float()


def get_model():
    return ConvNet()


def get_example_inputs():
    return (torch.randn(2, 8, 32, 32),)
