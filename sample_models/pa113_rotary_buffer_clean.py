"""PA113 clean twin of pa113_rotary_buffer_hazard.py: the same persistent ``inv_freq`` buffer
(fp16 after ``model.half()``), but the positions and the phase are fp32 and autocast is off
for them, as Hugging Face's Llama rotary does: the buffer is read as ``.float()`` (its fp16
rounding shifts each frequency once, the same for every position) and only the cos/sin
tables take the activations' dtype."""
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x):
        with torch.autocast(device_type=x.device.type, enabled=False):
            t = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq.float())  # fp32 phases
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        return cos[None, :, None, :], sin[None, :, None, :]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class RotaryAttentionInput(nn.Module):
    """The query projection of one attention layer, rotated by the embedding's cos/sin."""

    def __init__(self, heads=4, head_dim=32):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.query = nn.Linear(heads * head_dim, heads * head_dim)
        self.rotary = RotaryEmbedding(head_dim)

    def forward(self, x):
        q = self.query(x).view(x.shape[0], x.shape[1], self.heads, self.head_dim)
        cos, sin = self.rotary(q)
        return q * cos + rotate_half(q) * sin


def get_model():
    return RotaryAttentionInput()


def get_example_inputs():
    return (torch.randn(1, 2048, 128),)
