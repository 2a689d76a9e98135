"""The ``explain`` table: every op, where it is, and what it computes in under the policy."""
from ..analysis.facts import fact


def render(graph, path, target, frontend, notes=()) -> str:
    """One row per op; "accumulates" is the kernel's accumulator (kernels.py), e.g. a pure
    fp16 softmax computes in fp16, accumulates in fp32 and stores fp16."""
    layers = graph.graph.get("keras_layers")  # a Keras model: each layer's dtype policy
    rows = [("node", "op", "module", *(("policy",) if layers else ()), "line", "in", "computes",
             "accumulates", "out", "why")]
    for name, a in graph.nodes(data=True):
        ins = ",".join(sorted({_short(d) for d in a["in_dtypes"] if d})) or "-"
        policy = (layers.get(a["module"], {}).get("policy", "-"),) if layers else ()
        rows.append((name, a["op"], a["module"] or "<root>", *policy, str(a["line"] or "-"), ins,
                     _short(a["compute_dtype"]), _short(fact(a, "kernel.accumulate_dtype")),
                     _short(a["out_dtype"]), fact(a, "precision.why") or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = [f"{path} under {target.dtype} {target.mode} ({target.device}), captured by {frontend}"]
    out += [f"note: {note}" for note in notes]
    for row in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    return "\n".join(out) + "\n"


_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


def _short(dtype) -> str:
    return _SHORT.get(dtype, dtype or "-")
