"""matmul → (scale, mask) → softmax chains: which matmul makes the logits, and how much of
their scale is applied before it (to q, to k, as baddbmm's alpha, or by a scale the runtime
fuses into the GEMM) and how much after.

Writes an ``AttentionFacts`` (analysis/facts.py) under ``attention`` on the logits GEMM:
``feeds_softmax``, ``scale_before`` / ``scale_after`` (the product of the constant factors,
1.0 for none, None for a scale whose value is not known), ``scaled_before`` /
``scaled_after`` (a factor other than 1 is there) and ``head_dim`` (the GEMM's contraction
extent, None where the shapes do not tell it); and one on the softmax, ``logits_from``.
"""
import math

from ..ir.graph import producers
from .facts import AttentionFacts

GEMMS = {"matmul", "bmm", "baddbmm", "einsum", "mm"}
BETWEEN = {"div", "mul", "add", "sub", "masked_fill", "where", "to", "float", "half", "type_as",
           "clamp", "tanh"}
SCALES = {"div", "mul"}
#: ops a scaled q or k may pass through on its way to the GEMM without changing its values
PASS_THROUGH = {"to", "float", "half", "type_as", "contiguous", "clone"}
#: the operands of a GEMM: baddbmm's first input is the bias added to the product
OPERANDS = {"baddbmm": (1, 2)}


def _op(node) -> str:
    """The op, in-place or not: Falcon's `attention_logits *= self.inv_norm_factor` is mul_."""
    return node["op"].rstrip("_")


def scale_factor(node):
    """The factor a mul/div node scales its tensor by: a float (1.0 when it is none: T5 runs
    its unscaled logits through ``* scaling`` with scaling = 1.0), None for a tensor operand
    whose value is not known, or False when the node is no scale at all."""
    if _op(node) not in SCALES:
        return False
    known = [(aten, v) for aten, v in node["scalars"]
             if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if known:
        factor = 1.0
        for aten, v in known:
            if aten.rstrip("_") == "div":
                factor = factor / v if v else math.inf
            else:
                factor *= v
        return factor
    return None if len(node["in_dtypes"]) == 2 else False


def _times(total, factor):
    return None if total is None or factor is None else total * factor


def _operand_scale(graph, name):
    """Product of the scales applied to one GEMM operand on its way from its last real op."""
    total = 1.0
    for _ in range(8):
        node = graph.nodes[name]
        factor = scale_factor(node)
        if factor is False and _op(node) not in PASS_THROUGH:
            break
        if factor is not False:
            total = _times(total, factor)
        preds = producers(graph, name)
        if not preds:
            break
        name = preds[0]
    return total


def _head_dim(node):
    """The contraction extent of q @ k^T: q's last dim, where k^T's second-to-last agrees."""
    first = OPERANDS.get(node["op"], (0, 1))[0]
    shapes = node["in_shapes"][first:first + 2]
    if node["op"] == "einsum" or len(shapes) != 2 or not all(s and len(s) >= 2 for s in shapes):
        return None
    d, other = shapes[0][-1], shapes[1][-2]
    return d if isinstance(d, int) and d == other and d > 0 else None


#: ops between a projection and the q it makes that only move, select or rescale its values
TO_QUERY = PASS_THROUGH | SCALES | {"view", "reshape", "permute", "transpose", "unbind", "getitem", "chunk",
                                    "split", "unflatten", "normalize", "contiguous", "select"}


def query_rows(graph, name) -> set:
    """The row counts (every dim but the last: batch, tokens) of the projection's input that
    made q, the first operand of the GEMM or SDPA call ``name``; empty where no linear is
    found. In cross-covariance attention (XCiT's XCA) q is transposed to (head_dim, tokens),
    so the dim the logits contract is one of these: a token count, not a head dim."""
    current = name
    for _ in range(12):
        preds = producers(graph, current)
        if not preds:
            return set()
        current = preds[0]
        node = graph.nodes[current]
        if node["op"] == "linear":
            rows = tuple(node["out_shape"] or ())[:-1]  # the output keeps the input's rows
            return {d for d in rows if isinstance(d, int)}
        if _op(node) not in TO_QUERY:
            return set()
    return set()


def _before(graph, name, node):
    """Scale applied before the product is stored: on q and k, and baddbmm's alpha (cuBLAS
    multiplies the fp32 accumulator by it before the fp16 store)."""
    total = 1.0
    operands = OPERANDS.get(node["op"], (0, 1))
    for source in graph.predecessors(name):
        if graph.edges[source, name].get("arg", 0) in operands:
            total = _times(total, _operand_scale(graph, source))
    alpha = node.get("keywords", {}).get("alpha")
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        total = _times(total, alpha)
    return total


def annotate(graph):
    for name, node in list(graph.nodes(data=True)):
        if node["op"] not in ("softmax", "log_softmax"):
            continue
        scales = {}  # scale node between the GEMM and the softmax → its factor
        current = name
        for _ in range(8):
            preds = producers(graph, current)
            if not preds:
                break
            current = preds[0]
            cur = graph.nodes[current]
            if cur["op"] in GEMMS:
                # a scale the runtime fuses into the GEMM is applied before the store
                before = _times(_before(graph, current, cur), scales.pop(cur.get("fused_scale"), 1.0))
                after = 1.0
                for factor in scales.values():
                    after = _times(after, factor)
                cur["attention"] = AttentionFacts(feeds_softmax=name, scale_before=before, scale_after=after,
                                                  scaled_before=before != 1.0, scaled_after=after != 1.0,
                                                  head_dim=_head_dim(cur))
                node["attention"] = AttentionFacts(logits_from=current)
                break
            if _op(cur) not in BETWEEN:
                break
            factor = scale_factor(cur)
            if factor is not False:
                scales[current] = factor
