"""PA108 clean twin: predictions and targets are upcast before the loss."""
import torch
import torch.nn.functional as F
from torch import nn


class Regressor(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, y):
        return F.mse_loss(self.proj(x).float(), y.float())


def get_model():
    return Regressor()


def get_example_inputs():
    return (torch.randn(4, 64), torch.randn(4, 64))
