"""bench/range_bench.py's model: gpt_1b.py (1.3 B parameters) built on ``meta`` (its weights
come from the safetensors file the bench writes) and 8 calibration batches of 128 tokens."""
import torch
from gpt_1b import VOCAB, GPT

BATCHES, TOKENS = 8, 128


def get_model():
    with torch.device("meta"):
        return GPT().eval()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(0)),)


def calibration_batches():
    generator = torch.Generator().manual_seed(1)
    for _ in range(BATCHES):
        yield (torch.randint(0, VOCAB, (1, TOKENS), generator=generator),)
