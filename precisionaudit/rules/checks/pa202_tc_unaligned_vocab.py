"""PA202 tc-unaligned-vocab: a vocabulary-sized dim (≥ 8192) is not a multiple of 64."""
from __future__ import annotations

from ..registry import Hit, check
from .gemm_shapes import VOCAB_ALIGN, VOCAB_MIN, node_of_module, padded


GEMM_OPS = {"linear", "addmm", "mm", "matmul"}


@check
def tc_unaligned_vocab(graph, target):
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
        values = {"size": size, "padded": up, "waste_pct": waste, "module_type": facts.get("type", "matrix")}
        others = [m for m in tied.get(weight, []) if m != owner] if weight else []
        if others:
            values["tied_with"] = others
        hits.append(Hit(name if name is not None else node_of_module(graph, owner), values, module=owner))
    return hits
