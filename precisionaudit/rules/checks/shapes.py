"""Checks for the Tensor Core shape rules (PA2xx): performance hints, never errors."""
from __future__ import annotations

import math

from ...ir.graph import producers
from ..registry import check, param

ALIGN = {"float16": 8, "bfloat16": 8}
VOCAB_MIN, VOCAB_ALIGN = 8192, 64


def _from_softmax(graph, name) -> bool:
    """The GEMM's left operand is a softmax's probabilities (probs @ v)."""
    preds = producers(graph, name) if name is not None else []
    return bool(preds) and graph.nodes[preds[0]]["op"] in ("softmax", "_softmax")


def gemm_dims(graph, node, name=None) -> list[tuple[str, int]]:
    """[(name, size)] of the GEMM dims the model fixes (weights, head dims), not the batch."""
    if node["op"] == "linear" or (node["params"] and node["op"] in ("addmm", "mm")):
        weights = [shape for _, shape in node["params"] if shape and len(shape) == 2]
        if weights and None not in weights[0]:
            n, k = weights[0]
            return [("N (out_features)", n), ("K (in_features)", k)]
    if node["op"] in ("matmul", "bmm", "mm", "baddbmm") and len(node["in_shapes"]) >= 2:
        a, b = node["in_shapes"][:2]
        if a and b and len(a) >= 2 and len(b) >= 2:
            runtime = graph.graph.get("input_dims", set())
            dims = [("K", a[-1]), ("N", b[-1])]
            if not node["params"]:
                # two activations: the key count (N of logits feeding a softmax, K of the
                # probabilities times v) and any dim equal to the left operand's rows (the
                # tokens) are set by the input, not the model
                runtime = runtime | {a[-2]}
                if node.get("feeds_softmax"):
                    dims = dims[:1]
                if _from_softmax(graph, name):
                    dims = dims[1:]
            # a matrix-vector product (N or K of 1) has no Tensor Core path to pad towards
            return [(n, d) for n, d in dims if d is not None and d not in runtime and d > 1]
    return []


def padded(size: int, multiple: int) -> tuple[int, float]:
    up = math.ceil(size / multiple) * multiple
    return up, round(100 * (up - size) / up, 1)


@check
def unaligned_gemm(graph, name, node, target):
    if not node["low_precision"]:
        return None
    multiple = ALIGN[target.dtype]
    for dim, size in gemm_dims(graph, node, name):
        if dim.startswith("N (") and size >= VOCAB_MIN:
            continue  # vocabulary-sized: PA202 judges it against 64
        if size % multiple:
            up, waste = padded(size, multiple)
            return {"dim": dim, "size": size, "multiple": multiple, "padded": up, "waste_pct": waste}
    return None


def _node_of_module(graph, module):
    return next((n for n, a in graph.nodes(data=True) if a["module"] == module), None)


GEMM_OPS = {"linear", "addmm", "mm", "matmul"}


def _ran(graph, module) -> bool:
    """A module with an op in the captured forward (every module, for a structure-only scan)."""
    return graph.graph.get("structure_only", False) or _node_of_module(graph, module) is not None


@check
def unaligned_vocab(graph, target):
    """Vocabulary-sized weights a GEMM multiplies by (not embedding lookups), once per weight:
    a matrix tied between an embedding and the output projection is one finding."""
    modules = graph.graph.get("modules", {})
    tied = {}
    for module, facts in modules.items():
        tied.setdefault(facts.get("weight"), []).append(module)
    uses = {}  # weight name -> (node, module, output features)
    if graph.graph.get("structure_only", False):
        for module, facts in modules.items():
            if "out_features" in facts:
                uses.setdefault(facts.get("weight") or module, (None, module, facts["out_features"]))
    else:
        for name, node in graph.nodes(data=True):
            if node["op"] not in GEMM_OPS:
                continue
            for weight, shape in node["params"]:
                if shape and len(shape) == 2:  # linear: (N, K); x @ W: (K, N)
                    n = shape[0] if node["op"] == "linear" else shape[-1]
                    uses.setdefault(weight, (name, node["module"], n))
    hits = []
    for weight, (name, module, size) in uses.items():
        owner = next((m for m in tied.get(weight, []) if "out_features" in modules[m]), module)
        facts = modules.get(owner, {})
        if size is None or size < VOCAB_MIN or size % VOCAB_ALIGN == 0:
            continue
        up, waste = padded(size, VOCAB_ALIGN)
        evidence = {"module": owner, "size": size, "padded": up, "waste_pct": waste,
                    "module_type": facts.get("type", "matrix")}
        others = [m for m in tied.get(weight, []) if m != owner] if weight else []
        if others:
            evidence["tied_with"] = others
        hits.append((name if name is not None else _node_of_module(graph, owner), evidence))
    return hits


@check
def unaligned_channels(graph, target):
    hits = []
    multiple = ALIGN[target.dtype]
    for module, facts in graph.graph.get("modules", {}).items():
        if "in_channels" not in facts or facts.get("groups", 1) > 1 or not _ran(graph, module):
            continue  # grouped/depthwise convs have no Tensor Core path to lose
        bad = [(k, facts[k]) for k in ("in_channels", "out_channels") if facts[k] % multiple]
        if not bad:
            continue
        which, size = bad[0]
        up, _ = padded(size, multiple)
        evidence = {"module": module, "channels": which, "size": size, "padded": up,
                    "module_type": facts["type"]}
        if all(n <= param("input_layer_channels") for _, n in bad):
            # an RGB/audio input layer, an image/latent/few-class output: the data fixes it
            evidence["case"] = "input-layer" if which == "in_channels" else "output-layer"
        hits.append((_node_of_module(graph, module), evidence))
    return hits


@check
def small_gemm(graph, name, node, target):
    dims = [d for n, d in gemm_dims(graph, node) if n.startswith(("N", "K"))]
    if node["op"] != "linear" or len(dims) != 2 or not node["low_precision"]:
        return None
    if dims[0] * dims[1] < param("min_weight_elements"):
        return {"n": dims[0], "k": dims[1]}
    return None


@check
def fp32_gemm(graph, name, node, target):
    if node["compute_dtype"] != "float32":
        return None
    weights = [math.prod(s) for _, s in node["params"] if s and len(s) == 2]
    if weights and weights[0] >= param("min_weight_elements"):
        return {"weight_elements": weights[0], "why": node.get("why")}
    if not weights and node["op"] in ("matmul", "bmm") and len(node["in_shapes"]) >= 2:
        a, b = node["in_shapes"][:2]
        if a and b and None not in a and b[-1] is not None and math.prod(a) * b[-1] >= (1 << 27):
            return {"flops": 2 * math.prod(a) * b[-1], "why": node.get("why")}
    return None


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
def head_dim(graph, name, node, target):
    if node["op"] != "scaled_dot_product_attention" and not node.get("feeds_softmax"):
        return None
    size = query_head_dim(node)
    if size is None or size % 8 == 0 and size <= 256:
        return None
    return {"head_dim": size, "problem": "above 256" if size > 256 else "not a multiple of 8"}
