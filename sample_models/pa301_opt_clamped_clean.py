"""PA301 clean: OPT's attention after transformers PR #17437, the fix of #17433 (the hazard
twin, pa301_opt_clamped_hazard.py, without it).

The logits get OPT's finfo(dtype).min mask added, then
``torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))`` bounds them
below: whatever the sum rounded to (-65504 + a score, or -inf), the next op brings it back to
the dtype's range, and the softmax runs in fp32. The values near -65504 are the mask
constant itself and sums the next op clamps: no value can grow past fp16's range here.

    precisionaudit scan pa301_opt_clamped_clean.py --data example --mode pure
"""
import torch
from pa301_opt_clamped_hazard import Attention, get_example_inputs  # noqa: F401
from pa301_opt_clamped_hazard import get_model as _hazard_model


class BoundedAttention(Attention):
    def bounded(self, attn_weights):
        return torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))


def get_model():
    model = _hazard_model()
    model.attn.__class__ = BoundedAttention
    return model
