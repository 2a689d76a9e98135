import torch


def get_model():
    return {"not": "a module"}

def get_example_inputs():
    return (torch.randn(2, 4),)
