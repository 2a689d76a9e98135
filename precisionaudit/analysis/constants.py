"""Constants each op meets, and what they become in the dtype they meet."""
from ..core.numerics import SMALLEST_NORMAL, rounds_to
from .facts import Constant, ConstantFacts

#: aten ops whose scalar arguments are values mixed into the tensor (not sizes or dims).
VALUE_OPS = {"masked_fill", "masked_fill_", "fill", "fill_", "full", "full_like", "new_full",
             "index_fill", "add", "sub", "rsub", "mul", "div", "clamp", "clamp_min", "clamp_max", "where",
             "scalar_tensor", "lift_fresh_copy", "maximum", "minimum", "add_", "mul_", "div_",
             "initializer",  # an ONNX weight whose largest element does not fit
             "setitem"}  # t[index] = value (the recorder keeps the Python number as written)


def classify(value: float, dtype: str) -> tuple[float, str]:
    """(stored value, 'ok' | 'overflow' | 'underflow' | 'subnormal') of `value` in `dtype`."""
    stored = rounds_to(value, dtype)
    if value != 0 and abs(stored) == float("inf") and abs(value) != float("inf"):
        return stored, "overflow"
    if value != 0 and stored == 0:
        return stored, "underflow"
    if value != 0 and abs(stored) < SMALLEST_NORMAL[dtype]:
        return stored, "subnormal"
    return stored, "ok"


def annotate(graph):
    for _, node in graph.nodes(data=True):
        dtype = node["compute_dtype"]
        found = []
        if dtype in ("float16", "bfloat16", "float32"):
            for aten, value in node["scalars"]:
                if aten.rstrip("_") in VALUE_OPS or aten in VALUE_OPS:
                    if isinstance(value, (int, float)) and value == value:
                        stored, status = classify(float(value), dtype)
                        found.append(Constant(value=value, dtype=dtype, stored=stored, status=status, aten=aten))
        node["constant"] = ConstantFacts(tuple(found))
