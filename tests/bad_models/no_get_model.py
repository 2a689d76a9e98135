import torch


def build():
    return torch.nn.Linear(4, 4)
