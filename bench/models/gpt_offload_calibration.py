"""bench/range_bench.py --offload's model: gpt_1b.py's blocks, 64 of them (3.3 B parameters,
13 GB in fp32: more than half of a 24 GiB machine), built on ``meta``; the weights come
from the sharded safetensors directory the bench writes. Two calibration batches of 32
tokens: the point is the memory, not the time."""
import torch
import torch.nn as nn
from gpt_1b import VOCAB, GPT, Block

LAYERS, BATCHES, TOKENS = 64, 2, 32


def get_model():
    with torch.device("meta"):
        model = GPT()
        model.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
    return model.eval()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(0)),)


def calibration_batches():
    generator = torch.Generator().manual_seed(1)
    for _ in range(BATCHES):
        yield (torch.randint(0, VOCAB, (1, TOKENS), generator=generator),)
