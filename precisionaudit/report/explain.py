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
    judged = f"float8 ({target.recipe} recipe; bf16 autocast around the FP8 GEMMs)" if target.recipe \
        else target.dtype
    out = [f"{path} under {judged} {target.mode} ({target.device}), captured by {frontend}"]
    out += [f"note: {note}" for note in notes]
    out += _table(rows)
    if target.recipe:
        out += ["", f"FP8 GEMMs under --recipe {target.recipe}, per Linear GEMM:"] + _table(fp8_rows(graph))
    return "\n".join(out) + "\n"


def _table(rows) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in rows]


def fp8_rows(graph) -> list[tuple]:
    """One row per linear the FP8 pass judged: whether it runs in FP8 or falls back to bf16,
    and why (with the libraries' advice to keep the head and tiny GEMMs in bf16)."""
    rows = [("node", "module", "N x K", "runs in", "why")]
    for name, a in graph.nodes(data=True):
        facts = a.get("fp8")
        if facts is None:
            continue
        if not facts.runs_fp8:
            why = facts.fallback
        elif facts.output_head:
            why = "output head: torchao's filter and Megatron-LM keep it in bf16 (PA602)"
        else:
            why = "eligible"
        size = f"{facts.n}x{facts.k}" if facts.k is not None else "?"
        rows.append((name, a["module"] or "<root>", size, "FP8" if facts.runs_fp8 else "bf16", why))
    return rows


_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


def _short(dtype) -> str:
    return _SHORT.get(dtype, dtype or "-")
