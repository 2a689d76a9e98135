"""PA301 clean twin: the same masked attention with transformers' fix for #17433 (PR #17437):
the masked logits are bounded below by ``finfo(dtype).min``, so a row that rounded to -inf
in fp16 is -65504 again and its softmax is uniform, as in fp32."""
import torch
from pa301_padded_row_hazard import Attention, get_example_inputs  # noqa: F401
from pa301_padded_row_hazard import get_model as _hazard_model


class BoundedAttention(Attention):
    def masked(self, scores, keep):
        scores = super().masked(scores, keep)
        return torch.max(scores, torch.tensor(torch.finfo(scores.dtype).min, device=scores.device))


def get_model():
    model = _hazard_model()
    model.attn.__class__ = BoundedAttention
    return model
