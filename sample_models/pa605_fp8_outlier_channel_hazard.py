"""PA605 hazard under --dtype float8 --data example: a norm gain makes input channel 7 of the
MLP's first Linear 1e5 times the others, as LLMs' massive activations
(Sun et al. 2024) are: the other channels lose bits under tensorwise and rowwise scales."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.down = nn.Linear(ff, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=4096, d=1024, ff=4096):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = Block(d, ff)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        # the head is the embedding matrix read by F.linear: no nn.Linear to convert, it stays bf16
        return F.linear(self.norm(self.block(self.embed(ids))), self.embed.weight).float()


def get_model():
    torch.manual_seed(0)
    model = TinyLM()
    with torch.no_grad():
        model.block.norm.weight[7] = 1e5  # channel 7 leaves the norm 1e5 times the rest
    return model


def get_example_inputs():
    return (torch.randint(0, 4096, (2, 128), generator=torch.Generator().manual_seed(0)),)
