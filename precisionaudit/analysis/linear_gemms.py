"""What the FP8 and FP4 passes share about a Linear GEMM: its shape, whether torchao and
Transformer Engine convert it at all, whether it is the output head, which repeated block it
sits in, and how Megatron-style tensor parallelism splits it across ``--tp`` ranks.

- torchao (``convert_to_float8_training``, ``quantize_``) and Transformer Engine swap
  ``nn.Linear`` *modules*: an ``F.linear`` call outside one, and a module's own ``addmm``
  (Hugging Face's ``Conv1D``), stay bf16.
- The output head is a linear that no other GEMM and no residual join follows (a final MLP
  projection added back into the stream is not the head).
- Tensor parallelism (Megatron-LM ``ColumnParallelLinear`` / ``RowParallelLinear``): inside a
  block a Linear whose output reaches another GEMM before the residual stream (QKV, the MLP's
  up and gate projections, Mamba's in_proj, an expert's w1/w3) is column-parallel, N split by
  the degree; one whose output is added back into the stream first (attention's output
  projection, the MLP's down projection, Mamba's out_proj, an expert's w2) is row-parallel,
  K split. A MoE router (a
  module named ``gate`` or ``router``) and Linears outside the block stack are replicated; the
  output head is column-parallel over the vocabulary, which Megatron pads to a multiple of
  ``make_vocab_size_divisible_by`` (128) times the degree.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import networkx as nx

from ..core.errors import UsageError

#: ops that are a GEMM: a linear followed by one of them is not the model's last layer
GEMM_OPS = frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "conv1d", "conv2d",
                      "conv3d", "scaled_dot_product_attention"})
#: Megatron-LM's default ``make_vocab_size_divisible_by``: the vocabulary is padded to a
#: multiple of it times the tensor-parallel degree
VOCAB_PADDING = 128
#: ops that join two streams: a residual add (the in-place forms, and index_add into a buffer)
JOIN_OPS = frozenset({"add", "__add__", "__iadd__", "add_", "index_add", "index_add_"})
#: module names of MoE routers (Mixtral's and Qwen-MoE's ``gate``, ``router``): replicated
ROUTER_NAMES = frozenset({"gate", "router"})
_INDEX = re.compile(r"^\d+$")


@dataclass(frozen=True)
class LinearShape:
    """One linear node's GEMM: K (in_features), N (out_features), M (tokens of the example
    input), whether a library converts it (and why not), the head, the weight it is tied to."""

    k: int | None
    n: int | None
    m: int | None
    convertible: bool
    not_converted: str  # why no library converts it ("" when one does)
    output_head: bool
    tied_to: str | None


def weight_of(node) -> tuple[str, tuple] | None:
    return next(((name, tuple(shape)) for name, shape in node["params"] if shape and len(shape) == 2), None)


def is_linear_gemm(node) -> bool:
    """A linear call, or an addmm on a module's 2-D weight (a GEMM the FLOP shares count)."""
    return node["op"] == "linear" or (node["op"] == "addmm" and weight_of(node) is not None)


def _owner(param: str) -> str:
    return param.rpartition(".")[0]


def stream_follows(graph) -> dict:
    """node -> whether a GEMM or a residual join (an add of two computed tensors) is
    downstream of it: a linear with neither is the model's output head."""
    follows: dict = {}
    for name in reversed(list(nx.topological_sort(graph))):
        follows[name] = any(_continues(graph, s) or follows[s] for s in graph.successors(name))
    return follows


def _continues(graph, name) -> bool:
    op = graph.nodes[name]["op"]
    return op in GEMM_OPS or (op in ("add", "__add__", "__iadd__", "add_") and graph.in_degree(name) >= 2)


def shape_of(node, follows: dict, name: str) -> LinearShape:
    weight = weight_of(node)
    if node["op"] == "linear":
        n, k = weight[1] if weight else (None, None)  # F.linear's weight is (out, in)
    else:
        k, n = weight[1] if weight else (None, None)  # addmm(bias, x, W): W is (in, out)
    m = math.prod(node["out_shape"][:-1]) if node.get("out_shape") and None not in node["out_shape"] else None
    tied = _owner(weight[0]) if weight and _owner(weight[0]) != node["module"] else None
    # the call is an nn.Linear module's own (its class name: Linear, NonDynamicallyQuantizableLinear)
    convertible = node["op"] == "linear" and node["module_type"].endswith("Linear") and bool(node["module"])
    if node["op"] != "linear":
        why = (f"addmm of a {node['module_type'] or 'module'} weight, not an nn.Linear: torchao and "
               "Transformer Engine convert nn.Linear modules only")
    elif not convertible:
        why = "F.linear outside an nn.Linear module: torchao and Transformer Engine convert modules"
    elif k is None or n is None:
        why = "weight shape unknown"
    else:
        why = ""
    return LinearShape(k=k, n=n, m=m, convertible=convertible, not_converted=why,
                       output_head=not follows.get(name, True), tied_to=tied)


# --------------------------------------------------------------------------- the block stack
@dataclass(frozen=True)
class BlockStack:
    """The model's stack of repeated blocks (``model.layers``): its path and length."""

    path: str
    blocks: int

    def index_of(self, module: str) -> int | None:
        """The block ``module`` sits in (``model.layers.3.mlp.up`` -> 3), or None."""
        prefix = self.path + "." if self.path else ""
        if not module.startswith(prefix):
            return None
        head = module[len(prefix):].split(".", 1)[0]
        return int(head) if _INDEX.match(head) else None

    def block_path(self, index: int) -> str:
        return f"{self.path}.{index}" if self.path else str(index)


def block_stack(modules) -> BlockStack | None:
    """The stack of repeated blocks the Linears ``modules`` sit in: for each path its first
    numeric component (``model.layers.3.mlp.experts.7.w1``: layers 3), the prefix with the most
    distinct indices (at least 2; a tie goes to the stack that runs last, an encoder-decoder's
    decoder). None when the Linears are in no stack."""
    found: dict[str, set] = {}
    order: dict[str, int] = {}
    for i, module in enumerate(modules):
        parts = module.split(".") if module else []
        first = next((j for j, p in enumerate(parts) if _INDEX.match(p)), None)
        if first is None:
            continue
        prefix = ".".join(parts[:first])
        found.setdefault(prefix, set()).add(int(parts[first]))
        order[prefix] = i
    stacks = [(len(indices), order[prefix], prefix) for prefix, indices in found.items() if len(indices) >= 2]
    if not stacks:
        return None
    _, _, prefix = max(stacks)
    return BlockStack(prefix, max(found[prefix]) + 1)


# --------------------------------------------------------------------------- tensor parallelism
def split_kind(graph, name: str, module: str, stack: BlockStack | None, output_head: bool) -> str:
    """How Megatron-style tensor parallelism splits the linear node ``name`` (in ``module``):
    ``row`` (K) when its output is added back into the stream it was computed from before any
    other GEMM (an add whose other operand is upstream of this Linear: the residual; rotary
    embeddings' adds of two halves of q, or a bias a parameter makes, are no such join),
    ``column`` (N) otherwise; the head is column-parallel, routers and Linears outside the
    block stack replicated."""
    if output_head:
        return "column"
    if module.rpartition(".")[2] in ROUTER_NAMES or stack is None or stack.index_of(module) is None:
        return "replicated"
    upstream = None
    seen, todo = {name}, list(graph.successors(name))
    while todo:
        succ = todo.pop()
        if succ in seen:
            continue
        seen.add(succ)
        op = graph.nodes[succ]["op"]
        if op in GEMM_OPS:
            continue  # the column-parallel half of the pair ends at the next GEMM
        if op in JOIN_OPS and graph.in_degree(succ) >= 2:
            upstream = upstream if upstream is not None else nx.ancestors(graph, name)
            if any(p in upstream for p in graph.predecessors(succ)):
                return "row"
        todo.extend(graph.successors(succ))
    return "column"


def rank_dims(k: int, n: int, split: str, tp: int, module: str, output_head: bool) -> tuple[int, int]:
    """(K, N) on one of ``tp`` ranks. The head's vocabulary is padded as Megatron pads it; any
    other split dim that ``tp`` does not divide is a ValueError naming the layer."""
    if tp == 1 or split == "replicated":
        return k, n
    if output_head and split == "column":
        multiple = VOCAB_PADDING * tp
        return k, math.ceil(n / multiple) * multiple // tp
    dim, size = ("N (out_features)", n) if split == "column" else ("K (in_features)", k)
    if size % tp:
        raise ValueError(f"--tp {tp} does not divide {module}'s {dim} {size} (a {split}-parallel Linear)")
    return (k, n // tp) if split == "column" else (k // tp, n)


def judged_gemms(graph):
    """(name, node, shape, split, rank K, rank N, block stack) of every linear GEMM of the graph,
    the dims one rank's under the target's ``--tp``: what the FP8 and FP4 passes both judge.
    A ``--tp`` that does not divide a split dim is a UsageError."""
    target = graph.graph.get("target")
    tp = getattr(target, "tp", 1)
    follows = stream_follows(graph)
    nodes = [(name, node) for name, node in graph.nodes(data=True) if is_linear_gemm(node)]
    stack = block_stack([node["module"] for _, node in nodes if node["module"]])
    out = []
    for name, node in nodes:
        shape = shape_of(node, follows, name)
        split = split_kind(graph, name, node["module"], stack, shape.output_head) if tp > 1 else "replicated"
        k, n = shape.k, shape.n
        if shape.convertible and k is not None and n is not None:
            try:
                k, n = rank_dims(k, n, split, tp, node["module"], shape.output_head)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        out.append((name, node, shape, split, k, n, stack))
    return out
