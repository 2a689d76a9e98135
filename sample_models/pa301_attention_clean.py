"""PA301 clean twin: the same attention through F.scaled_dot_product_attention, whose fused
CUDA kernels keep q.k and the softmax in fp32 registers: the massive activations of the
calibration batches do not overflow there."""
import torch
from pa301_attention_hazard import Attention, Model, calibration_batches, get_example_inputs  # noqa: F401


class FusedAttention(Attention):
    def forward(self, x):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.o(out.transpose(1, 2).flatten(2))


def get_model():
    torch.manual_seed(0)
    model = Model()
    model.attn.__class__ = FusedAttention
    return model
