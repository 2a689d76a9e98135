"""A 32768x32768 projection stack built on the meta device: 4 GiB per weight if allocated."""
import torch
from torch import nn


def get_model():
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(32768, 32768), nn.GELU(), nn.Linear(32768, 32768))


def get_example_inputs():
    return (torch.randn(2, 32768),)
