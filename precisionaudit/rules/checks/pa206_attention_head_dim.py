"""PA206 attention-head-dim: attention head dim not a multiple of 8 or above 256."""
from __future__ import annotations

from ...analysis.attention import query_rows
from ...analysis.facts import fact
from ..registry import Hit, check


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
    return Hit(name, {"head_dim": size, "problem": "above 256" if size > 256 else "not a multiple of 8"})
