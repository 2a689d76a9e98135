"""Convert an fp32 ONNX model to float16 with a plan's nodes kept in float32.

The conversion is runtime/onnx/float16.py's; this module reads the plan: which nodes and
op types it keeps, refusing a plan made for another kind of model, dtype or graph.
"""
from __future__ import annotations

from onnx import ModelProto

from ..core.errors import UsageError
from ..runtime.onnx.float16 import Conversion, to_float16

BF16_UNSUPPORTED = ("bfloat16 conversion is not supported: onnxconverter-common converts to "
                    "float16 only, and onnxruntime's CPU provider has no bfloat16 kernels for most "
                    "ops (Add, MatMul, Exp, ...), so a bfloat16 model could not be checked before it "
                    "is written; use --dtype float16")


def convert(model: ModelProto, plan=None, dtype: str = "float16", keep_io_types: bool = False,
            source: str = "model.onnx") -> Conversion:
    """The float16 model (not yet verified or written) and what the conversion did."""
    if dtype != "float16":
        raise UsageError(BF16_UNSUPPORTED)
    nodes, op_types, notes = resolve_plan(plan, model.graph, dtype) if plan is not None else (set(), set(), [])
    conversion = to_float16(model, nodes, op_types, keep_io_types, source)
    conversion.warnings = notes
    return conversion


def resolve_plan(plan, graph, dtype: str):
    """(node names, op types, warnings) the plan keeps in fp32 in ``graph``; a plan for
    another kind of model, another dtype or another graph is a UsageError."""
    source = plan.source
    if plan.overrides and not plan.is_onnx or plan.keep_fp32_modules:
        raise UsageError(f"{source}: a plan for a PyTorch model (module entries); make one for the "
                         "ONNX model with `precisionaudit plan MODEL.onnx`")
    for key, want in (("dtype", dtype), ("mode", "pure")):
        have = plan.target.get(key)
        if have is not None and have != want:
            raise UsageError(f"{source}: the plan was made for {key} {have}, not {want}")
    present = {n.name for n in graph.node}
    types = {n.op_type for n in graph.node}
    nodes, op_types, notes = set(), set(), []
    for index, entry in enumerate(plan.overrides):
        missing = [n for n in entry.nodes or () if n not in present]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise UsageError(f"{source}: overrides[{index}] names node {missing[0]!r}{more}, which "
                             "the model does not have (a plan made for another model?)")
        nodes.update(entry.nodes or ())
        absent = [t for t in entry.op_types or () if t not in types]
        if absent:
            notes.append(f"{source}: overrides[{index}]: the model has no {', '.join(absent)} node")
        op_types.update(entry.op_types or ())
    return nodes, op_types, notes
