"""Why each op computes in the dtype it does: autocast list, explicit cast, promotion."""
from ..core.autocast_policy import POLICY, aten_short
from ..core.numerics import LOW_PRECISION_NAMES as LOW
from ..core.target import Target
from .facts import PrecisionFacts


def autocast_kind(node) -> str | None:
    """The CUDA autocast list an op falls in ('fp32', 'lower_precision_fp', ...), if any."""
    for name in [node["op"], *node["atens"], aten_short(node["target"])]:
        for base in (name, name.lstrip("_")):
            for key in (base, f"{base}.int", f"{base}.Tensor_Scalar"):
                if key in POLICY:
                    return POLICY[key]
    return None


def reason(node, target) -> str:
    if node["explicit_cast"]:
        return "explicit cast"
    if target.mode == "pure" and node["compute_dtype"] in LOW:
        return f"pure {target.dtype} model"
    if target.mode == "autocast" and not node["autocast_enabled"]:
        return "autocast disabled here"
    kind = autocast_kind(node) if target.mode == "autocast" else None
    low = node["compute_dtype"] in LOW
    if kind == "lower_precision_fp":
        return "autocast: lower_precision_fp list" if low else "autocast disabled here"
    if kind == "half":
        return "autocast: cuDNN RNNs run in float16 under any autocast dtype" if low else "autocast disabled here"
    if kind in ("fp32", "fp32_set_opt_dtype", "fp32_append_dtype") and not low:
        return f"autocast: {kind} list"
    if kind == "promote" or len({d for d in node["in_dtypes"] if d in LOW | {"float32"}}) > 1:
        return "type promotion"
    return "follows its inputs"


def annotate(graph):
    target = graph.graph.get("target") or Target()  # a core.target.Target, as the capture judged it
    for _, node in graph.nodes(data=True):
        node["precision"] = PrecisionFacts(low_precision=node["compute_dtype"] in LOW, why=reason(node, target))
