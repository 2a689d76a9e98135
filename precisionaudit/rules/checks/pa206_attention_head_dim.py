"""PA206 attention-head-dim: attention head dim not a multiple of 8 or above 256.

What PyTorch's SDPA does with such a head dim on CUDA (aten/src/ATen/native/transformers:
cuda/sdp_utils.cpp's filters, attention.cpp's dispatch): flash attention takes any head dim up
to 256 and no attention mask, padding q, k and v to a multiple of 8 (``pad_last_dim<8>``) and
slicing the output; the memory-efficient kernel needs the head dim divisible by 8 in fp16/bf16
(``check_head_dim_size_mem_efficient``) and takes masks; cuDNN needs a multiple of 8 and at most
128 (256 on sm90/sm100 with a recent cuDNN). So a masked call whose head dim is not a multiple
of 8 runs the unfused math path, and an unmasked one runs flash on padded copies.
"""
from __future__ import annotations

import networkx as nx

from ...analysis.attention import query_rows
from ...analysis.facts import fact
from ...ir.graph import producers
from ..registry import Hit, check

#: transformers' SDPA attention (``sdpa_attention_forward``), whose masks masking_utils builds
TRANSFORMERS_SDPA = "transformers/integrations/sdpa_attention.py"


def query_head_dim(node):
    """The head dim of q: the contracted dim of the logits GEMM (a[-1] == b[-2], the output
    a[:-1] x b[-1]), or SDPA's q; never the mask's or the ALiBi bias's last dim (the key
    length), whichever input comes first."""
    shapes = [tuple(s) for s in node["in_shapes"] if s and len(s) >= 2]
    out = tuple(node["out_shape"] or ())
    if not out:
        return None
    if node["op"] == "scaled_dot_product_attention":
        # q is shaped like the output but for its last dim, which k (and v) share; a mask
        # shaped like the output ends in the key length, which no other input ends in
        queries = [s for s in shapes if s[:-1] == out[:-1]]
        if not queries:
            return out[-1]
        return max(queries, key=lambda q: sum(o[-1] == q[-1] for o in shapes if o is not q))[-1]
    for a in shapes:
        for b in shapes:
            if a is not b and a[-1] == b[-2] and a[-2] == out[-2] and b[-1] == out[-1]:
                return a[-1]
    return None


@check
def attention_head_dim(graph, name, node, target):
    if node["op"] != "scaled_dot_product_attention" and not fact(node, "attention.feeds_softmax"):
        return None
    size = query_head_dim(node)
    if size is None or size % 8 == 0 and size <= 256:
        return None
    if size in query_rows(graph, name):
        return None  # channel x channel attention (XCiT): it contracts the tokens
    if size > 256:
        kernels = "flash attention and cuDNN do not take it (256 at most)" + (
            "; only the memory-efficient kernel does" if size % 8 == 0 else
            ", nor does the memory-efficient kernel (not a multiple of 8): SDPA runs its unfused math path")
        return Hit(name, {"head_dim": size, "problem": "above 256", "kernels": kernels})
    padded = -(-size // 8) * 8
    sdpa = node["op"] == "scaled_dot_product_attention"
    masked = not sdpa or _masked(graph, name, node, size)
    flash = f"flash attention pads q, k and v to {padded} ({padded / size - 1:.0%} more work)"
    kernels = "the memory-efficient and cuDNN kernels do not take it; " + (
        f"{flash} but takes no attention mask: masked, SDPA runs its unfused math path" if masked else
        f"{flash} to run it")
    return Hit(name, {"head_dim": size, "problem": "not a multiple of 8", "kernels": kernels},
               case=None if masked else "padded")


def _masked(graph, name, node, head_dim) -> bool:
    """The SDPA call gets an attention mask that also runs on the GPU, so flash attention never
    runs it. Not the mask transformers' SDPA integration gets from positions alone (a causal
    mask, no model input in it): transformers builds that only while tracing (the capture's
    fake tensors look like tracing to it) and passes ``is_causal`` instead when nothing is
    padded, which flash attention takes."""
    if len([s for s in node["in_shapes"] if s]) <= 3:  # q, k and v: no attn_mask
        return False
    if not (node.get("file") or "").replace("\\", "/").endswith(TRANSFORMERS_SDPA):
        return True
    keys = {s[-2] for s in node["in_shapes"] if s and len(s) >= 2 and s[-1] == head_dim}
    masks = [p for p in producers(graph, name)  # the producer whose output ends in the key length
             if (graph.nodes[p]["out_shape"] or (None,))[-1] in keys - {head_dim}]
    return any(graph.nodes[a].get("sources") for m in masks for a in nx.ancestors(graph, m) | {m})
