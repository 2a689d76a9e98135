"""The one IR: a networkx DiGraph whose nodes are user-level ops.

Frontends (PyTorch, ONNX) build it from ``OpNode`` records; analysis passes add one typed
record each to node attributes (analysis/facts.py); rules only read it. Node keys are unique op names ("softmax", "softmax_1", ...);
edges run producer → consumer. Graph attributes (``G.graph``) hold model-level facts.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import networkx as nx


@dataclass
class OpNode:
    """The facts a frontend records for one op, as they are under the target policy."""

    name: str
    op: str  # canonical user-level op: "softmax", "matmul", "linear", "masked_fill", "to"
    target: str  # main aten / ONNX op: "aten._softmax.default", "onnx::Softmax"
    atens: list = field(default_factory=list)  # every compute op the call ran
    in_dtypes: list = field(default_factory=list)  # dtypes entering the op, before autocast
    in_shapes: list = field(default_factory=list)  # a dim is None where it is unknown (ONNX's symbolic dims)
    compute_dtype: str | None = None  # dtype the main op computes in
    out_dtype: str | None = None
    out_shape: tuple | None = None
    scalars: list = field(default_factory=list)  # Python scalars / known 0-d constants read
    keywords: dict = field(default_factory=dict)  # scalars the main op took by keyword (baddbmm's alpha)
    # the scale node right after this GEMM that the runtime applies to its fp32 accumulator
    # before the store, as baddbmm's alpha (ONNX Runtime's MatMulScaleFusion)
    fused_scale: str | None = None
    params: list = field(default_factory=list)  # [(param name, shape), ...] read directly
    module: str = ""  # named_modules() path, "" for the root
    module_type: str = ""
    file: str | None = None
    line: int | None = None
    column: int | None = None  # 1-based, where the call expression starts
    autocast_enabled: bool = True  # False inside an autocast(enabled=False) region
    autocast_cast: bool = False  # autocast changed the dtype of an input of this op
    explicit_cast: bool = False  # the op is a user-written cast (.float(), .to(dtype))
    banned: bool = False  # autocast refuses this op (binary_cross_entropy)
    dims: list = field(default_factory=list)  # dim / int arguments (reduction dims, ...)
    flags: list = field(default_factory=list)  # bool arguments of the main op (batch norm's training)
    # What the passes derive (the kernel's accumulator, a reduction's extent, the value
    # range, calibration statistics) is no OpNode field: no frontend records it, so each
    # lives in its pass's record (analysis/facts.py: KernelFacts, ReductionFacts, ...).


#: keys the PyTorch capture adds to a node only where it has them: the model inputs it reads
#: (``sources``), parameters it reads through a view (``param_views``) and operands it could
#: not trace (``untracked_operands``)
CAPTURE_KEYS = ("sources", "param_views", "untracked_operands")


def new_graph(**attrs) -> nx.DiGraph:
    """An empty IR graph with the graph-level facts every frontend fills: ``inputs``,
    ``outputs``, ``params``, ``modules``, ``input_dims``; ``attrs`` adds others, such as
    ``target`` (the ``core.target.Target`` the capture judged under: the object, not its dict)."""
    graph = nx.DiGraph()
    graph.graph.update({"inputs": [], "outputs": [], "params": {}, "modules": {},
                        "input_dims": set()})
    graph.graph.update(attrs)
    return graph


def add_op(graph: nx.DiGraph, node: OpNode) -> str:
    graph.add_node(node.name, **asdict(node))
    return node.name


def numel(shape) -> int | None:
    """The elements of a recorded shape; None where the shape or any of its dims is unknown
    (an ONNX file's symbolic ``batch`` or ``sequence``): a bound built on it has none."""
    if shape is None or any(not isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)


def producers(graph: nx.DiGraph, node: str) -> list[str]:
    return sorted(graph.predecessors(node), key=lambda p: graph.edges[p, node].get("arg", 0))


def consumers(graph: nx.DiGraph, node: str) -> list[str]:
    return list(graph.successors(node))
