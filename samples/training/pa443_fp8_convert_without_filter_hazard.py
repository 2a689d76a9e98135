"""PA443 hazard: every nn.Linear of the language model goes to FP8, the head included."""
import torch
from torchao.float8 import convert_to_float8_training


def prepare(model):
    convert_to_float8_training(model)
    return torch.compile(model)
