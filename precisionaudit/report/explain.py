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
    judged = f"float8 ({target.recipe} recipe; bf16 autocast around the FP8 GEMMs)" if target.fp8_recipe \
        else target.dtype
    if target.fp4:
        judged = f"{target.fp4} (bf16 autocast around the {target.fp4.upper()} GEMMs" + \
            (f", --tp {target.tp})" if target.tp > 1 else ")")
    out = [f"{path} under {judged} {target.mode} ({target.device}), captured by {frontend}"]
    out += [f"note: {note}" for note in notes]
    out += _table(rows)
    if target.fp8_recipe:
        out += ["", f"FP8 GEMMs under --recipe {target.recipe}, per Linear GEMM:"] + _table(fp8_rows(graph))
    if target.fp4:
        out += ["", f"{target.fp4.upper()} GEMMs, per Linear GEMM (measured columns with --weights/--data; "
                "Wgrad rank: worst first):"] + _table(fp4_rows(graph))
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


def fp4_rows(graph) -> list[tuple]:
    """One row per linear the FP4 pass judged: where it sits (block, --tp split), whether it runs
    in FP4 and why not, and what the range pass measured of it: the SQNR of its input, weight,
    forward GEMM and Wgrad GEMM (dB), the share of its blocks below NVFP4's scale window or
    clipped by MX's floor rule, the share that keep fewer than half their values."""
    ranked = {}
    for _, a in graph.nodes(data=True):
        r = a.get("fp4_range")
        if r is not None and r.sqnr_db("wgrad") is not None:
            ranked.setdefault(a["module"], r.sqnr_db("wgrad"))
    order = {m: i + 1 for i, m in enumerate(sorted(ranked, key=ranked.get))}
    rows = [("node", "module", "N x K", "split", "block", "runs in", "in dB", "w dB", "gemm dB", "wgrad dB",
             "rank", "scale/clip", "hollow", "why")]
    for name, a in graph.nodes(data=True):
        f = a.get("fp4")
        if f is None:
            continue
        r = a.get("fp4_range")
        why = f.fallback or ("output head: the recipes keep it in bf16 (PA612)" if f.output_head else "eligible")
        cells = ["-"] * 7
        if r is not None:
            worst = max((r.block_share(t, "subnormal") + r.block_share(t, "flushed") + r.block_share(t, "floor_clips")
                         for t in ("input", "weight") if r.operand(t) is not None), default=None)
            hollow = max((r.block_share(t, "hollow") for t in ("input", "weight") if r.operand(t) is not None),
                         default=None)
            cells = [_db(r.sqnr_db(p)) for p in ("input", "weight", "gemm", "wgrad")] + [
                str(order.get(a["module"], "-")), _share(worst), _share(hollow)]
        size = f"{f.n}x{f.k}" if f.k is not None else "?"
        block = "-" if f.block is None else f"{f.block}/{f.blocks}"
        rows.append((name, a["module"] or "<root>", size, f.split, block, f.format.upper() if f.runs_fp4 else "bf16",
                     *cells, why))
    return rows


def _db(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _share(value) -> str:
    return "-" if value is None else f"{value:.1%}"


_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


def _short(dtype) -> str:
    return _SHORT.get(dtype, dtype or "-")
