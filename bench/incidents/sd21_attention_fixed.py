"""Fixed twin of ``sd21_attention.py``: the upstream fix of
https://github.com/huggingface/diffusers/pull/1590: ``upcast_attention=True`` (SD 2.1's UNet
config): query and key cast to fp32 before the baddbmm, the softmax in fp32, the
probabilities cast back to the UNet's dtype.
"""
import torch
from torch import nn

DIM, HEADS, DIM_HEAD, TOKENS = 128, 2, 64, 64  # SD 2.1: 64 per head; an 8x8 latent
UPCAST_ATTENTION = True  # the upstream fix (diffusers#1590)


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
