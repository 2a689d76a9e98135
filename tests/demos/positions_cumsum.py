"""Pure bf16, position ids counted with a cumsum over an attention mask in the model's
dtype (OPT/GPT-NeoX style): bf16 holds integers exactly only up to 256, so tokens 257..600
get the positions of their neighbours. The plan counts them in fp32."""
import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, vocab=100, positions=1024, dim=16):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)

    def forward(self, ids):
        x = self.tokens(ids)
        mask = torch.ones(ids.shape, dtype=x.dtype)
        position_ids = (mask.cumsum(-1) - 1).long()
        return x + self.positions(position_ids)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embeddings()
        self.head = nn.Linear(16, 4)

    def forward(self, ids):
        return self.head(self.embed(ids)).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randint(0, 100, (1, 600)),)
