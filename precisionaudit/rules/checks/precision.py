"""Checks for the numerical rules (PA1xx)."""
from __future__ import annotations

from ...analysis.rnn import STEP_OPS
from ...core.numerics import EXACT_INTEGER_LIMIT
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...core.numerics import SMALLEST_SUBNORMAL
from ...ir.graph import consumers, producers
from ..registry import check, param


def accumulates_low(node) -> bool:
    """The kernel's accumulator is fp16/bf16 (the kernel table's answer, else the compute dtype)."""
    return (node.get("accumulate_dtype") or node["compute_dtype"]) in LOW


@check
def softmax_low_precision(graph, name, node, target):
    """A softmax kernel accumulating in low precision (one the kernel table does not know, such
    as ONNX Runtime's), or low-precision probabilities fed to a log or a division. A softmax
    written by hand is reported where it goes wrong: its exp (PA105) and its sum (PA103)."""
    if node["op"] in ("softmax", "log_softmax") and accumulates_low(node):
        return {"problem": f"accumulates its exponentials and their sum in {node['compute_dtype']}: "
                           "they overflow or lose precision"}
    consumer = node.get("probs_consumer")
    if not node.get("softmax_output") or not consumer or node["out_dtype"] not in LOW:
        return None
    use = graph.nodes[consumer]
    dtype = node["out_dtype"]
    tiny = SMALLEST_SUBNORMAL[dtype]
    harm = "takes their log" if use["op"].startswith("log") else "divides by them"
    result = "-inf" if use["op"].startswith("log") else "inf"
    return {"problem": f"stores its probabilities in {dtype} and {use['op']} (line {use['line']}) "
                       f"{harm}: probabilities below {tiny:.1e} are 0 in {dtype} and give {result}",
            "pattern": node["softmax_output"], "consumer": consumer}


@check
def norm_low_precision(graph, name, node, target):
    """Norms whose kernel keeps its statistics in low precision, and hand-written norms."""
    evidence = _norm_hazard(graph, name, node, target)
    if evidence is not None:
        dtype = evidence.get("statistic_dtype") or node["compute_dtype"]
        evidence["problem"] = ("a square above 256 overflows float16's 65504 and E[x^2] - E[x]^2 "
                               "cancels" if dtype == "float16" else
                               f"E[x^2] - E[x]^2 cancels with {dtype}'s 8 significand bits")
    return evidence


def _norm_hazard(graph, name, node, target):
    if node["op"] == "batch_norm" and target.mode == "autocast":
        return None  # cuDNN/native BN take fp32 weights and accumulate statistics in fp32
    pattern = node.get("norm_pattern")
    if node["op"] in ("mean", "sum", "rsqrt", "sqrt") and not pattern:
        return None
    if pattern == "mean of squares":
        if node["low_precision"] or node.get("square_dtype") in LOW:
            # (c * c).mean() overflows in the square: the fix moves both to fp32
            square = graph.nodes[node["square_node"]]["op"]
            return {"pattern": pattern, "statistic_dtype": node.get("square_dtype") or node["compute_dtype"],
                    "fix_ops": list(dict.fromkeys([square, node["op"]]))}
        return None
    if not node["low_precision"]:
        return None
    if pattern == "rsqrt of a variance":
        return None if _variance_already_reported(graph, name) else {"pattern": pattern}
    if not node.get("computes_statistics", True) or not accumulates_low(node):
        return None  # eval-mode batch norm, or a fused kernel with fp32 statistics (kernels.py)
    return {"pattern": node["op"]}


def _variance_already_reported(graph, name) -> bool:
    """The hand-written variance feeding this rsqrt/sqrt is itself flagged: report it once."""
    for p in producers(graph, name):
        candidates = [p, *producers(graph, p)] if graph.nodes[p]["op"] == "add" else [p]
        for c in candidates:
            node = graph.nodes[c]
            if node.get("norm_pattern") == "mean of squares" and (
                    node["low_precision"] or node.get("square_dtype") in LOW):
                return True
    return False


#: reductions whose result grows with the extent (or is a squared magnitude): their stored
#: result can pass fp16's 65504 even when the kernel accumulates in fp32. Not a vector norm:
#: its result is at most sqrt(n) times the largest element (the squares stay in the fp32
#: accumulator), so it leaves fp16's range only for inputs whose RMS is above 65504/sqrt(n)
GROWING = {"sum", "nansum", "prod", "var", "var_mean"}


@check
def reduction_low_precision(graph, name, node, target):
    if node.get("norm_pattern"):
        return None  # reported as a hand-written norm (PA102)
    extent = node.get("reduced_extent")
    dtype = node["compute_dtype"]
    if accumulates_low(node):
        problem = (f"reduces {extent} elements and accumulates in {dtype}: the running value "
                   "leaves its range or stops taking small increments")
    elif node["op"] in GROWING and dtype == "float16":
        problem = (f"accumulates in {node['accumulate_dtype']} but stores the result over {extent} "
                   "elements in float16, whose range ends at 65504")
    else:
        return None  # fp32 accumulator and a result within the input's range (or bf16's)
    evidence = {"extent": extent, "problem": problem, "accumulate_dtype": node.get("accumulate_dtype")}
    if extent is not None and extent < param("short_extent"):
        evidence["case"] = "short"
    return evidence


@check
def rnn_state(graph, name, node, target):
    """nn.LSTM/GRU/RNN (any length), and hand-written recurrences over min_steps or more."""
    if node["op"] in STEP_OPS:
        steps = node.get("rnn_steps")
        if steps is None or steps < param("min_steps") or node.get("rnn_state_dtype") not in LOW:
            return None
        return {"steps": steps, "dtype": node["rnn_state_dtype"]}
    return {"steps": node.get("rnn_steps")}


@check
def attention_logits(graph, name, node, target):
    """fp16-stored logits that are scaled down after the GEMM while less than the 1/sqrt(d)
    they need was applied before it (to q, k or as baddbmm's alpha, which cuBLAS applies to
    the fp32 accumulator). bf16 has fp32's range; logits of normalised q/k have a value range
    that fits; a scale of unknown value before the GEMM is taken to do its job."""
    if node["out_dtype"] != "float16" or node.get("value_range") is not None or not node.get("feeds_softmax"):
        return None
    before, after, d = node.get("scale_before", 1.0), node.get("scale_after", 1.0), node.get("head_dim")
    if (after is not None and abs(after) >= 1) or before is None:
        return None  # nothing shrinks the logits after the GEMM, or an unknown scale before it
    needed = d ** -0.5 if d else None
    if before != 1 and (needed is None or abs(before) <= needed * (1 + param("tolerance"))):
        return None
    return {"softmax": node["feeds_softmax"], "scale_before": before, "scale_after": after,
            "head_dim": d, "scale_needed": needed, "scales": _scales_text(before, after, d, needed)}


def _scales_text(before, after, d, needed) -> str:
    first = "no scale before it" if before == 1 else f"x{before:.4g} applied before it"
    rest = "a scale of unknown value" if after is None else f"x{after:.4g}"
    need = f" (1/sqrt({d}) = {needed:.4g} belongs before it)" if needed else ""
    return f"with {first} and {rest} left after it{need}"


@check
def unrepresentable_constant(graph, name, node, target):
    bad = [c for c in node["constants"] if c["status"] in ("overflow", "underflow")]
    if not bad:
        return None
    worst = next((c for c in bad if c["status"] == "overflow"), bad[0])
    evidence = {"value": worst["value"], "value_text": f"{worst['value']:g}", "stored": worst["stored"],
                "status": worst["status"], **({"case": "underflow"} if worst["status"] == "underflow" else {}),
                "becomes": ("-inf" if worst["value"] < 0 else "inf") if worst["status"] == "overflow" else "0"}
    if node["op"] == "setitem" or node["op"].endswith("_"):
        # t[i] = value, t.fill_(value), t.masked_fill_(...) keep t's dtype: no fp32 region changes it
        evidence["fix_instead"] = {"action": "replace",
                                   "use": f"a value {worst['dtype']} holds (torch.finfo(t.dtype).max or .min)"}
    return evidence


@check
def integer_precision(graph, name, node, target):
    dtype = node["out_dtype"]
    bound = node.get("int_max")
    if dtype not in LOW or bound is None:
        return None
    limit = EXACT_INTEGER_LIMIT[dtype]
    if bound <= limit:
        return None
    for p in producers(graph, name):  # report where the loss starts, not every op after it
        before = graph.nodes[p]
        if before["out_dtype"] == dtype and (before.get("int_max") or 0) > limit:
            return None
    return {"max_value": bound, "exact_limit": limit}


@check
def low_precision_outputs(graph, target):
    hits = []
    for out in graph.graph.get("outputs", []):
        if out["dtype"] in LOW and out["node"] is not None:
            hits.append((out["node"], {"output_dtype": out["dtype"]}))
    return hits


@check
def ineffective_upcast(graph, name, node, target):
    if target.mode != "autocast" or node["out_dtype"] != "float32":
        return None
    undone = [c for c in consumers(graph, name)
              if graph.nodes[c]["autocast_cast"] and graph.nodes[c]["low_precision"]]
    if not undone:
        return None
    first = graph.nodes[undone[0]]
    evidence = {"undone_by": undone[0], "undone_op": first["op"], "undone_line": first["line"]}
    bound, limit = node.get("int_max"), EXACT_INTEGER_LIMIT.get(target.dtype)
    if bound is not None and limit is not None and bound > limit:
        # the upcast was protecting integers (positions) the autocast dtype cannot hold exactly
        evidence.update(case="integers", max_value=bound, exact_limit=limit)
    return evidence


def _phase_threshold(node) -> float:
    """The phase error PA113 reports: an assumed unit-scale input needs the larger one."""
    assumed = node["phase_basis"] == "unit-scale inputs"
    return param("unknown_range_error" if assumed else "max_phase_error")


def _phase_hazard(node) -> bool:
    return node.get("phase_error") is not None and node["phase_error"] >= _phase_threshold(node)


@check
def phase_precision(graph, name, node, target):
    """A low-precision store on a sin/cos phase's chain whose rounding is a large phase error
    (analysis/phases.py), reported at the chain's first such store: where the loss starts."""
    if not _phase_hazard(node) or any(_phase_hazard(graph.nodes[b]) for b in node["phase_stores_before"]):
        return None
    sinusoid = graph.nodes[node["phase_sinusoid"]]
    assumed = node["phase_basis"] == "unit-scale inputs"
    return {"phase_error": node["phase_error"], "phase_max": node["phase_max"],
            "error_text": f"{node['phase_error']:.3g}", "phase_text": f"{node['phase_max']:.4g}",
            "basis": node["phase_basis"], "sinusoid": sinusoid["op"], "sinusoid_line": sinusoid["line"],
            "assumed": " (model inputs taken as lying in [-1, 1])" if assumed else "",
            "fix_ops": node["phase_fix_ops"]}
