"""PA116 clean twin of pa116_offset_cast_hazard.py: the LayerNorm1P keeps ``weight + 1.0``
and the normalisation in fp32 (autocast off, the input upcast) and hands the result back in
the input's dtype: the offset is applied before anything is rounded."""
import torch
import torch.nn.functional as F
from pa116_offset_cast_hazard import get_example_inputs  # noqa: F401
from pa116_offset_cast_hazard import get_model as _hazard_model
from torch import nn


class LayerNorm1P(nn.LayerNorm):
    def forward(self, input):
        with torch.autocast(device_type=input.device.type, enabled=False):
            out = F.layer_norm(input.float(), self.normalized_shape, self.weight + 1.0, self.bias, self.eps)
        return out.to(input.dtype)


def get_model():
    model = _hazard_model()
    model.norm.__class__ = LayerNorm1P
    return model
