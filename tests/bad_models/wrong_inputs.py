import torch


def get_model():
    return torch.nn.Linear(64, 64)

def get_example_inputs():
    return (torch.randn(2, 32),)
