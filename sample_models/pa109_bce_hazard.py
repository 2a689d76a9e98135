"""PA109 hazard: binary_cross_entropy on sigmoid outputs inside the autocast region."""
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.head = nn.Linear(d, 64)

    def forward(self, x, target):
        return F.binary_cross_entropy(torch.sigmoid(self.head(x)), target)


def get_model():
    return Classifier()


def get_example_inputs():
    return (torch.randn(4, 64), torch.rand(4, 64))
