"""A small MLP built on the meta device: it has no weights until --weights gives them."""
import torch
from torch import nn


def get_model():
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def get_example_inputs():
    return (torch.randn(2, 4),)
