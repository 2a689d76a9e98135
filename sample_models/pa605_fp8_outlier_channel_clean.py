"""PA605 clean twin: the same function, the norm's 1e5 gain on channel 7 split between the
norm and column 7 of the next Linear's weight (SmoothQuant's smoothing, s = sqrt(1e5)): the
FP8 input's channel 7 is ~316x the rest, the weight's column 7 ~316x the others, both well
inside E4M3's range."""
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
        s = 1e5 ** 0.5
        model.block.norm.weight[7] = 1e5 / s  # the input carries sqrt(1e5) of the gain
        model.block.up.weight[:, 7] *= s  # the weight the other sqrt(1e5): y is unchanged
    return model


def get_example_inputs():
    return (torch.randint(0, 4096, (2, 128), generator=torch.Generator().manual_seed(0)),)
