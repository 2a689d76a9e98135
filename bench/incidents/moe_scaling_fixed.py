"""Fixed twin of ``moe_scaling.py``: the upstream fix of
https://github.com/vllm-project/vllm/pull/13232: in fp16 the routed experts' output is not
scaled up by routed_scaling_factor; the shared experts' output, the MLP input and the
residual are scaled down by 1/routed_scaling_factor instead (the final RMSNorm cancels it).
"""
import torch
from torch import nn

D, F, EXPERTS, TOP_K = 64, 128, 4, 4  # every expert: no routing flip between dtypes
ROUTED_SCALING_FACTOR = 16.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)


class Expert(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.gate_up = nn.Linear(D, 2 * F, bias=False)
        self.down = nn.Linear(F, D, bias=False)
        with torch.no_grad():  # bf16-trained: large down projections
            self.gate_up.weight.mul_(8.0)
            self.down.weight.mul_(scale)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(gate) * up)


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(D, EXPERTS, bias=False)
        self.experts = nn.ModuleList(Expert(scale=400.0) for _ in range(EXPERTS))
        self.shared_experts = Expert(scale=4.0)

    def routed(self, x):
        weights = torch.softmax(self.gate(x), dim=-1, dtype=torch.float32)
        top, index = weights.topk(TOP_K, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            w = (top * (index == e)).sum(-1, keepdim=True).to(x.dtype)
            out = out + w * expert(x)
        return out

    def forward(self, x):
        if x.dtype != torch.float16:
            return self.routed(x) * ROUTED_SCALING_FACTOR + self.shared_experts(x)
        return self.routed(x) + self.shared_experts(x) * (1.0 / ROUTED_SCALING_FACTOR)  # the fix


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.post_attention_layernorm = RMSNorm(D)
        self.mlp = MoE()

    def forward(self, hidden_states, residual):
        if hidden_states.dtype == torch.float16:  # the fix: the stream is scaled down instead;
            hidden_states = hidden_states * (1.0 / ROUTED_SCALING_FACTOR)  # the norm cancels it
            residual = residual * (1.0 / ROUTED_SCALING_FACTOR)
        residual = hidden_states + residual  # vLLM's fused add + RMSNorm
        hidden_states = self.post_attention_layernorm(residual)
        return self.mlp(hidden_states) + residual


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(100, D)
        self.layer = DecoderLayer()
        self.norm = RMSNorm(D)
        self.lm_head = nn.Linear(D, 100, bias=False)

    def forward(self, ids):
        h = self.embed_tokens(ids)
        return self.lm_head(self.norm(self.layer(h, torch.zeros_like(h)))).float()


def get_model():
    return Model()


def get_example_inputs():
    torch.manual_seed(0)
    return (torch.randint(0, 100, (1, 16)),)
