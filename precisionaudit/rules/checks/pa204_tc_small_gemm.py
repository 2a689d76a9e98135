"""PA204 tc-small-gemm: a GEMM too small to use Tensor Cores well."""
from __future__ import annotations

from ..registry import Hit, check, param
from .gemm_shapes import gemm_dims


@check
def tc_small_gemm(graph, name, node, target):
    dims = [d for n, d in gemm_dims(graph, node) if n.startswith(("N", "K"))]
    if node["op"] != "linear" or len(dims) != 2 or not node["precision"].low_precision:
        return None
    if dims[0] * dims[1] < param("min_weight_elements"):
        return Hit(name, {"n": dims[0], "k": dims[1]})
    return None
