"""PA303: a checkpoint whose linear weights do not fit fp16 (BatchNorm folded into them).

Deployment exports fold a BatchNorm into the linear that follows it: W' = W * gamma /
sqrt(running_var + eps). A feature that is almost constant in training (here feature 0,
whose values stay around 1e-5) has a tiny running variance, and its column of W' grows to
~2e5. In fp32 nothing is wrong: 2e5 * 1e-5 is 2. Under fp16 autocast the linear casts its
weight to fp16, the column becomes inf, and so does every output. get_model() with its own
init is fine; trained_state_dict() stands in for the folded checkpoint.

    python -c "import pa303_folded_hazard as m, safetensors.torch as st; \
               st.save_file(m.trained_state_dict(), 'folded.safetensors')"
    precisionaudit scan pa303_folded_hazard.py --weights folded.safetensors
"""
import torch
from torch import nn

D = 32
FOLDED_SCALE = 2.0e5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)  # BatchNorm1d folded in
        self.head = nn.Linear(D, 8)

    def forward(self, x):
        return self.head(torch.relu(self.proj(x)))


def get_model():
    torch.manual_seed(0)
    return Model()


def trained_state_dict():
    """The folded checkpoint: feature 0's column scaled by gamma / sqrt(running_var + eps)."""
    state = get_model().state_dict()
    weight = state["proj.weight"].clone()
    weight[:, 0] = FOLDED_SCALE * weight[:, 0].sign()
    state["proj.weight"] = weight
    return state


def get_example_inputs():
    torch.manual_seed(1)
    x = torch.randn(4, D)
    x[:, 0] = 1e-5  # the nearly constant feature the BatchNorm rescaled
    return (x,)
