"""Stable Diffusion 2.1 in fp16: the attention scores leave fp16's range, the image goes black.

Thread: https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/5503 ("Got black image
when trying to use the SD model 2.1"), fixed in diffusers by
https://github.com/huggingface/diffusers/pull/1590 ("add an option to upcast attention to
fp32": "the query and key in cross attention will be up casted to fp32 and the qk matmul and
softmax operation will happen in fp32"; SD 2.1's UNet config sets ``upcast_attention``);
Stability's own code gained ``ATTN_PRECISION=fp32`` for it (Stability-AI/stablediffusion
8bde0cf). How large: https://github.com/showlab/Tune-A-Video/issues/103 measured
elements of q·k near 3e5 with SD 2.1's weights.
What failed: diffusers' ``Attention`` (``AttnProcessor``, ``get_attention_scores``) runs
``baddbmm(empty, q, k^T, beta=0, alpha=scale)`` in the UNet's dtype: alpha scales the fp32
accumulator, but the scaled scores are stored in fp16, and SD 2.1's exceed 65504: inf,
then NaN after the softmax.
Upstream fix: ``upcast_attention=True``: ``query.float()``, ``key.float()`` before the
baddbmm, softmax in fp32, probabilities cast back (fixed twin: ``sd21_attention_fixed.py``).
Target: float16 pure (``StableDiffusionPipeline.from_pretrained(..., torch_dtype=torch.float16)``).
"""
import torch
from torch import nn

DIM, HEADS, DIM_HEAD, TOKENS = 128, 2, 64, 64  # SD 2.1: 64 per head; an 8x8 latent
UPCAST_ATTENTION = False


class Attention(nn.Module):
    """diffusers' ``Attention`` with ``AttnProcessor`` (self-attention, no mask)."""

    def __init__(self, upcast_attention=UPCAST_ATTENTION):
        super().__init__()
        self.heads, self.scale, self.upcast_attention = HEADS, DIM_HEAD ** -0.5, upcast_attention
        inner = HEADS * DIM_HEAD
        self.to_q = nn.Linear(DIM, inner, bias=False)
        self.to_k = nn.Linear(DIM, inner, bias=False)
        self.to_v = nn.Linear(DIM, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, DIM), nn.Dropout(0.0)])
        with torch.no_grad():  # trained projections: q.k reaches ~3e5 (Tune-A-Video#103)
            self.to_q.weight.mul_(400.0)
            self.to_k.weight.mul_(400.0)

    def head_to_batch_dim(self, tensor):
        batch, seq, dim = tensor.shape
        tensor = tensor.reshape(batch, seq, self.heads, dim // self.heads).permute(0, 2, 1, 3)
        return tensor.reshape(batch * self.heads, seq, dim // self.heads)

    def batch_to_head_dim(self, tensor):
        batch, seq, dim = tensor.shape
        tensor = tensor.reshape(batch // self.heads, self.heads, seq, dim).permute(0, 2, 1, 3)
        return tensor.reshape(batch // self.heads, seq, dim * self.heads)

    def get_attention_scores(self, query, key):
        dtype = query.dtype
        if self.upcast_attention:
            query = query.float()
            key = key.float()
        baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype,
                                    device=query.device)
        attention_scores = torch.baddbmm(baddbmm_input, query, key.transpose(-1, -2), beta=0, alpha=self.scale)
        attention_probs = attention_scores.softmax(dim=-1)
        return attention_probs.to(dtype)

    def forward(self, hidden_states):
        query = self.head_to_batch_dim(self.to_q(hidden_states))
        key = self.head_to_batch_dim(self.to_k(hidden_states))
        value = self.head_to_batch_dim(self.to_v(hidden_states))
        attention_probs = self.get_attention_scores(query, key)
        hidden_states = self.batch_to_head_dim(torch.bmm(attention_probs, value))
        return self.to_out[1](self.to_out[0](hidden_states))


class BasicTransformerBlock(nn.Module):
    """diffusers' block, its self-attention part: norm1, attn1, residual."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.attn1 = Attention()

    def forward(self, hidden_states):
        return self.attn1(self.norm1(hidden_states)) + hidden_states


def get_model():
    torch.manual_seed(0)
    return BasicTransformerBlock()


def get_example_inputs():
    """A latent's tokens as the fp16 UNet hands them over (values fp16 holds exactly)."""
    torch.manual_seed(0)
    return (torch.randn(2, TOKENS, DIM).half().float(),)
