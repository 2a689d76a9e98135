"""A Llama-2-70B-shaped model (80 layers, d=8192, 64 heads, 8 KV heads, FFN 28672, vocab 32000).

Scale benchmark model (bench/scale_bench.py): ~69 B parameters, built on the ``meta`` device
so that building it allocates nothing (the scan materialises it as fake tensors). Written
plainly: RMSNorm with an explicit fp32 upcast, rotary angles in fp32 under
autocast(enabled=False), grouped-query attention through F.scaled_dot_product_attention,
SwiGLU MLP.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, D_MODEL, HEADS, KV_HEADS, FFN, VOCAB = 80, 8192, 64, 8, 28672, 32000
HEAD_DIM = D_MODEL // HEADS
ROPE_THETA, EPS = 10000.0, 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
        return self.weight * xf.to(x.dtype)


def rotary(positions, device):
    with torch.autocast(device_type=device.type, enabled=False):
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, device=device).float() / HEAD_DIM)
        angles = positions.float()[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D_MODEL, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(D_MODEL, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(D_MODEL, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, D_MODEL, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, D_MODEL))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.up_proj = nn.Linear(D_MODEL, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, D_MODEL, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(D_MODEL), RMSNorm(D_MODEL)
        self.self_attn, self.mlp = Attention(), MLP()

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(D_MODEL)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, ids):
        cos, sin = rotary(torch.arange(ids.shape[1], device=ids.device), ids.device)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x)).float()


def get_model():
    with torch.device("meta"):
        return Llama().eval()


def get_example_inputs():
    return (torch.randint(0, VOCAB, (1, 512)),)
