"""Bench model: a residual MLP stack with a hand-written softplus gate in the middle.

``log(1 + exp(z / 0.05))`` overflows float16 in its ``exp`` once z passes 0.55; the
``log`` brings the value back into range. Converted to float16 as a whole the gate is
inf and so is everything after it; keeping the three gate nodes in float32 fixes it.
onnx_bench.py exports it with both torch exporters.
"""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Gate(nn.Module):
    def __init__(self, dim: int, temperature: float = 0.05):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.temperature = temperature

    def forward(self, x):
        return x * torch.log(1 + torch.exp(self.proj(x) / self.temperature)) * self.temperature


class Net(nn.Module):
    def __init__(self, dim: int = 64, depth: int = 6):
        super().__init__()
        self.first = nn.Sequential(*(Block(dim) for _ in range(depth // 2)))
        self.gate = Gate(dim)
        self.second = nn.Sequential(*(Block(dim) for _ in range(depth - depth // 2)))
        self.head = nn.Linear(dim, 16)

    def forward(self, x):
        return self.head(self.second(self.gate(self.first(x))))


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(16, 64),)
