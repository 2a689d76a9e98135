"""PA301: a T5-style feed-forward whose output passes 65504 with trained weights (fp16 autocast).

Trained T5 checkpoints grow large `wo` weights. get_model() is the architecture with its
own init: nothing overflows. trained_state_dict() stands in for a trained checkpoint
(`wi` and `wo` scaled up); with it the fp32 output of `ff.wo` reaches ~1e5 on the example
inputs, inf in fp16, and the post-norm turns it into NaN. A static scan finds nothing: the
linears are ordinary fp16 GEMMs under autocast.

    python -c "import pa301_t5_ff_hazard as m, safetensors.torch as st; \
               st.save_file(m.trained_state_dict(), 't5_ff.safetensors')"
    precisionaudit scan pa301_t5_ff_hazard.py --weights t5_ff.safetensors --data example
"""
import torch
from torch import nn

D, F = 64, 256
WO_SCALE = 3500.0


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.wi = nn.Linear(D, F, bias=False)
        self.wo = nn.Linear(F, D, bias=False)

    def forward(self, x):
        return self.wo(torch.relu(self.wi(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = FeedForward()
        self.norm = nn.LayerNorm(D)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(D, 16)

    def forward(self, x):
        return self.head(self.block(x))


def get_model():
    torch.manual_seed(0)
    return Model()


def trained_state_dict():
    """The "checkpoint": large feed-forward weights, as trained T5s have."""
    state = get_model().state_dict()
    state["block.ff.wi.weight"] = state["block.ff.wi.weight"] * 8.0
    state["block.ff.wo.weight"] = state["block.ff.wo.weight"] * WO_SCALE
    return state


def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 8, D) * 4.0,)
