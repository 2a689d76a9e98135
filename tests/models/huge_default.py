"""A 32768x32768 projection stack built normally: the scan builds it on fake tensors."""
import torch
from torch import nn


def get_model():
    return nn.Sequential(nn.Linear(32768, 32768), nn.GELU(), nn.Linear(32768, 32768))


def get_example_inputs():
    return (torch.randn(2, 32768),)
