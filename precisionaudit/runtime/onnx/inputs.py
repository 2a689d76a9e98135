"""Inputs for checking an ONNX model, made from its graph inputs' types and shapes.

An ONNX file carries no example inputs, so they are generated, deterministically from
the seed: float inputs standard normal; integer inputs that index an embedding table
(a ``Gather`` on an initializer, through reshapes and casts) uniform below its row
count, so token ids stay in the vocabulary; other integer inputs and boolean inputs,
which are masks and flags more often than not, ones (nothing masked out). A dynamic
dimension has no size to guess: ``--input-shape name=2x128`` gives it, and without it
the check stops with the input and the dimension named.
"""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ...core.errors import UsageError
from ..shapes import MAX_ELEMENTS
from ..shapes import parse_shapes as named_shapes
from .graph import attribute, consumers

FLOATS = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}
INTS = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32, TensorProto.INT8: np.int8,
        TensorProto.UINT8: np.uint8, TensorProto.INT16: np.int16}
PASS_THROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Cast", "Identity", "Expand",
                "Transpose", "Slice", "Concat"}


def parse_shapes(values) -> dict[str, tuple[int, ...]]:
    """``["ids=2x128", "mask=2x128"]`` → {"ids": (2, 128), ...}."""
    return dict(named_shapes(values))


def graph_inputs(model) -> list:
    """The inputs a caller feeds (initializers listed as inputs by old exporters are not)."""
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _fixed(dim) -> bool:
    """A dim with a size: some exporters write -1 for a dynamic one."""
    return dim.HasField("dim_value") and dim.dim_value >= 0


def resolve_shapes(model, given: dict[str, tuple], source: str) -> dict[str, tuple[int, ...]]:
    """Every input's concrete shape: the declared one, with ``given`` for its dynamic dims."""
    inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f"--input-shape {unknown[0]}: {source} has no input of that name "
                         f"(its inputs: {', '.join(names)})")
    shapes = {}
    for vi in inputs:
        dims = vi.type.tensor_type.shape.dim
        if vi.name in given:
            shape = given[vi.name]
            if len(shape) != len(dims):
                raise UsageError(f"--input-shape {vi.name}: {len(shape)} dims given, the input has "
                                 f"{len(dims)}")
            for axis, (d, size) in enumerate(zip(dims, shape)):
                if _fixed(d) and d.dim_value != size:
                    raise UsageError(f"--input-shape {vi.name}: dim {axis} is fixed at {d.dim_value} "
                                     f"in {source}, not {size}")
            shapes[vi.name] = shape
            continue
        for axis, d in enumerate(dims):
            if not _fixed(d):
                label = f" ({d.dim_param!r})" if d.dim_param else ""
                example = "x".join(str(x.dim_value) if _fixed(x) else "N" for x in dims)
                raise UsageError(f"{source}: input {vi.name!r} has a dynamic dim {axis}{label}: give its "
                                 f"shape with --input-shape {vi.name}={example}")
        shapes[vi.name] = tuple(d.dim_value for d in dims)
    for name, shape in shapes.items():
        if math.prod(shape) > MAX_ELEMENTS:
            raise UsageError(f"{source}: input {name!r} declares {math.prod(shape):,} elements, more than "
                             f"the {MAX_ELEMENTS:,} a generated input may have")
    return shapes


def make_inputs(model, shapes: dict[str, tuple], seed: int, source: str):
    """(feed dict, description per input) for the graph inputs."""
    rng = np.random.default_rng(seed)
    tables = _embedding_rows(model)
    feeds, described = {}, {}
    for vi in graph_inputs(model):
        elem, shape = vi.type.tensor_type.elem_type, shapes[vi.name]
        if elem in FLOATS:
            feeds[vi.name] = rng.standard_normal(shape).astype(FLOATS[elem])
            how = "standard normal"
        elif elem in INTS and vi.name in tables:
            feeds[vi.name] = rng.integers(0, tables[vi.name], size=shape).astype(INTS[elem])
            how = f"uniform in [0, {tables[vi.name]}) (rows of the embedding table it indexes)"
        elif elem in INTS or elem == TensorProto.BOOL:
            dtype = INTS.get(elem, np.bool_)
            feeds[vi.name] = np.ones(shape, dtype=dtype)
            how = "ones"
        else:
            raise UsageError(f"{source}: input {vi.name!r} has element type "
                             f"{TensorProto.DataType.Name(elem)}, which check cannot generate")
        described[vi.name] = {"shape": list(shape), "dtype": str(feeds[vi.name].dtype), "values": how}
    return feeds, described


def _embedding_rows(model) -> dict[str, int]:
    """Integer input → rows of the smallest initializer table a ``Gather`` indexes with it."""
    graph = model.graph
    tables = {i.name: i.dims[0] for i in graph.initializer if len(i.dims) >= 1}
    readers = consumers(graph)
    rows = {}
    for vi in graph_inputs(model):
        frontier, seen = [vi.name], set()
        while frontier:
            tensor = frontier.pop()
            for node in readers.get(tensor, ()):
                if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == tensor \
                        and node.input[0] in tables and attribute(node, "axis", 0) == 0:
                    rows[vi.name] = min(rows.get(vi.name, tables[node.input[0]]), tables[node.input[0]])
                elif node.op_type in PASS_THROUGH and node.name not in seen:
                    seen.add(node.name)
                    frontier.extend(node.output)
    return rows

