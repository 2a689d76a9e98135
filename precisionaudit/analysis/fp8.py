"""Which Linear GEMMs run in FP8 under an FP8 target (``--dtype float8``), and why the
others fall back to bf16: one ``Fp8Facts`` record per linear node, under ``node["fp8"]``.

What the libraries convert, from their own sources:
- torchao ``convert_to_float8_training`` and Transformer Engine swap ``nn.Linear`` *modules*
  (``Float8Linear`` / ``te.Linear``): an ``F.linear`` call outside one stays bf16.
- FP8 GEMMs (``torch._scaled_mm``, cuBLASLt) need K and N divisible by 16; MXFP8's 1x32
  scale blocks need 32. torchao's documented ``module_filter_fn`` (and torchtitan's) keeps
  layers whose dims are not multiples of 16 out of FP8; Transformer Engine asserts "FP8
  execution requires 2D input matrices with height divisible by 8 and width divisible by 16".
- The last layer (the output head) is the layer both libraries' guidance keeps in bf16;
  ``output_head`` marks a linear that no other GEMM and no residual join follows (a final
  MLP projection added back into the stream is not the head), ``tied_to`` one whose weight
  is another module's (an embedding-tied LM head).
A module's own ``addmm`` (Hugging Face's ``Conv1D`` in GPT-2) is a GEMM no library converts:
it is recorded as a bf16 fallback so that the FLOP shares count it.
Nothing is written without an FP8 target: the other targets' graphs are unchanged.
"""
from __future__ import annotations

import math
import networkx as nx

from .facts import Fp8Facts

#: the multiple K and N must have for each recipe's FP8 GEMM
MULTIPLE = {"mxfp8": 32}
DEFAULT_MULTIPLE = 16
#: ops that are a GEMM: a linear followed by one of them is not the model's last layer
GEMM_OPS = frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "conv1d", "conv2d",
                      "conv3d", "scaled_dot_product_attention"})


def multiple_of(recipe: str) -> int:
    """The multiple K and N must have for ``recipe``'s FP8 GEMM."""
    return MULTIPLE.get(recipe, DEFAULT_MULTIPLE)


def dims_fallback(k: int, n: int, multiple: int) -> str:
    """Why a K x N GEMM cannot run in FP8 ("" when it can): the scan's and the check's words."""
    return f"K={k}, N={n}: FP8 GEMMs need both divisible by {multiple}" if k % multiple or n % multiple else ""


def _weight(node) -> tuple[str, tuple] | None:
    return next(((name, tuple(shape)) for name, shape in node["params"] if shape and len(shape) == 2), None)


def _owner(param: str) -> str:
    return param.rpartition(".")[0]


def _stream_follows(graph) -> dict:
    """node -> whether a GEMM or a residual join (an add of two computed tensors) is
    downstream of it: a linear with neither is the model's output head."""
    follows: dict = {}
    for name in reversed(list(nx.topological_sort(graph))):
        follows[name] = any(_continues(graph, s) or follows[s] for s in graph.successors(name))
    return follows


def _continues(graph, name) -> bool:
    op = graph.nodes[name]["op"]
    return op in GEMM_OPS or (op in ("add", "__add__", "__iadd__", "add_") and graph.in_degree(name) >= 2)


def facts_of(graph, node, recipe: str, follows: dict, name: str) -> Fp8Facts:
    multiple = multiple_of(recipe)
    weight = _weight(node)
    if node["op"] == "linear":
        n, k = weight[1] if weight else (None, None)  # F.linear's weight is (out, in)
    else:
        k, n = weight[1] if weight else (None, None)  # addmm(bias, x, W): W is (in, out)
    m = math.prod(node["out_shape"][:-1]) if node.get("out_shape") and None not in node["out_shape"] else None
    tied = _owner(weight[0]) if weight and _owner(weight[0]) != node["module"] else None
    # the call is an nn.Linear module's own (its class name: Linear, NonDynamicallyQuantizableLinear)
    convertible = node["op"] == "linear" and node["module_type"].endswith("Linear") and bool(node["module"])
    if node["op"] != "linear":
        fallback = (f"addmm of a {node['module_type'] or 'module'} weight, not an nn.Linear: torchao and "
                    "Transformer Engine convert nn.Linear modules only")
    elif not convertible:
        fallback = "F.linear outside an nn.Linear module: torchao and Transformer Engine convert modules"
    elif k is None or n is None:
        fallback = "weight shape unknown"
    else:
        fallback = dims_fallback(k, n, multiple)
    return Fp8Facts(recipe=recipe, convertible=convertible, runs_fp8=not fallback, fallback=fallback, k=k, n=n,
                    m=m, multiple=multiple, output_head=not follows.get(name, True), tied_to=tied)


def annotate(graph):
    target = graph.graph.get("target")
    recipe = getattr(target, "recipe", None)
    if not recipe:
        return
    follows = _stream_follows(graph)
    for name, node in graph.nodes(data=True):
        if node["op"] == "linear" or (node["op"] == "addmm" and _weight(node)):
            node["fp8"] = facts_of(graph, node, recipe, follows, name)
