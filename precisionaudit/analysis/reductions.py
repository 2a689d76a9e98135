"""How many elements each reduction folds into one output."""
import math

from .facts import ReductionFacts

REDUCTIONS = {"sum", "mean", "var", "std", "var_mean", "std_mean", "cumsum", "cumprod", "prod",
              "logsumexp", "norm", "linalg_vector_norm", "nansum", "nanmean", "softmax",
              "log_softmax", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d"}


def extent(shape, dims) -> int | None:
    if not shape:
        return None
    rank = len(shape)
    try:
        return math.prod(shape[d % rank] for d in dims) if dims else math.prod(shape)
    except (TypeError, ZeroDivisionError):
        return None


def annotate(graph):
    for _, node in graph.nodes(data=True):
        if node["op"] in REDUCTIONS and node["in_shapes"]:
            node["reduction"] = ReductionFacts(extent(node["in_shapes"][0], node["dims"]))
