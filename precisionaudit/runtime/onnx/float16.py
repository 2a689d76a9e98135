"""Convert an fp32 ONNX model to float16 with given nodes and op types kept in float32.

The conversion itself is onnxconverter-common's ``convert_float_to_float16`` (its
``node_block_list`` / ``op_block_list``); this module prepares the graph for it and
repairs what it gets wrong, so that the result loads:

* float ``Constant`` nodes become initializers, and an initializer read by both kept and
  converted nodes is split: the converter keeps an initializer in fp32 only when a kept
  node reads it, and would otherwise clip a -1e9 mask that only a kept node sees, or hand
  a converted node an fp32 weight;
* constants that do not fit float16 are clipped to +-65504 (not the converter's default
  1e4) and every clipped tensor is reported with the nodes that read it;
* ``Cast(to=float)`` nodes (the legacy TorchScript exporter writes them for ``.float()``
  and type promotion) keep casting to float32 while the converter declares their output
  float16, which onnxruntime refuses. Those that cast a float32 tensor are no-ops in the
  original and become ``Identity`` (left as Casts, one before a graph output also trips
  the converter's "downstream node of the second cast node should be graph output");
  the others (from integers) are retargeted to float16;
* the converter folds its cast-down/cast-up pair between two kept nodes only when the
  first has one reader: a kept ``Exp`` read by two kept nodes hands them its result
  rounded to float16 (inf) — those pairs are folded here;
* with ``keep_io_types`` an output produced by a kept node is left float16 by the
  converter: it is made float32 again;
* last, reconcile.py gives every tensor the dtype its writer really computes and each
  reader and graph output expects, with a Cast at each boundary the converter missed
  (a graph output also read by a node, a kept node reading a float16 graph output).

``Cast`` never goes into the op block list: the converter would meet its own inserted
Casts as blocked ops and never finish. Which nodes a plan keeps is apply/onnx.py's
business; the scan's calibration converts with none kept, to measure the float16 run.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto, helper, numpy_helper

from ...core.errors import UsageError
from ...core.numerics import FP16_MAX
from ...core.text import first_few
from .graph import FLOAT, FLOAT16, consumers, elem_types, name_nodes, refuse_converted
from .io import PROTO_LIMIT
from .reconcile import reconcile_dtypes

FP16_MIN_SUBNORMAL = 2.0 ** -24
SMALL_CONSTANT = 16  # tensors up to this size are eps/scale/mask constants, not weights


@dataclass
class Clipped:
    """A constant the conversion had to change beyond rounding."""

    tensor: str
    nodes: list[str]
    kind: str  # overflow (clipped to +-65504) or underflow (raised to +-2^-24)
    count: int
    value: float  # the most extreme original value

    def message(self) -> str:
        readers = first_few(self.nodes)
        if self.kind == "overflow":
            became = f"clipped to {np.copysign(FP16_MAX, self.value):g}"
            fix = "keep its readers in float32 (precisionaudit plan does) or change the constant"
        else:
            became = f"raised to {np.copysign(FP16_MIN_SUBNORMAL, self.value):.3g}"
            fix = "float16 has nothing smaller"
        many = f"{self.count} values up to " if self.count > 1 else ""
        return (f"constant {self.tensor!r} ({many}{self.value:g}, read by {readers or 'no node'}) "
                f"does not fit float16: {became}; {fix}")


@dataclass
class Conversion:
    model: ModelProto
    nodes: list[str]  # the original graph's node names
    kept: list[str]  # of those, the ones left in float32 (those asked for and the converter's own list)
    by_plan: list[str]  # of those, the ones asked for (``nodes``, ``op_types``: a plan's)
    retargeted_casts: list[str] = field(default_factory=list)
    boundary_casts: list[str] = field(default_factory=list)  # Casts reconcile_dtypes inserted
    clipped: list[Clipped] = field(default_factory=list)
    tiny_weights: int = 0  # weight values below 2^-24 raised to it (not reported one by one)
    warnings: list[str] = field(default_factory=list)

    @property
    def low_share(self) -> float:
        return 1 - len(self.kept) / len(self.nodes) if self.nodes else 1.0


def to_float16(model: ModelProto, nodes: set = frozenset(), op_types: set = frozenset(),
               keep_io_types: bool = False, source: str = "model.onnx") -> Conversion:
    """The float16 model (not yet verified or written) with ``nodes`` (names) and nodes of
    ``op_types`` kept in float32, and what the conversion did."""
    from onnxconverter_common.float16 import (
        DEFAULT_OP_BLOCK_LIST,
        convert_float_to_float16,
    )

    work = ModelProto()
    work.CopyFrom(model)
    graph = work.graph
    names = name_nodes(graph)
    refuse_converted(work, source, "convert the float32 model instead")
    op_block_list = sorted(set(DEFAULT_OP_BLOCK_LIST) | op_types)
    assert "Cast" not in op_block_list  # the converter would never finish
    kept = [n.name for n in graph.node if n.name in nodes or n.op_type in op_block_list]
    by_plan = [n.name for n in graph.node if n.name in nodes or n.op_type in op_types]
    kept_set = set(kept)
    no_op_casts = _no_op_casts_to_identity(work)
    _lift_constants(graph)
    _drop_initializer_types(graph)
    _split_shared(graph, kept_set)
    clipped, tiny = _clipped_constants(graph, kept_set)
    original_outputs = {o.name: o.type.tensor_type.elem_type for o in graph.output}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its truncation warnings: reported as clipped
            converted = convert_float_to_float16(
                work, min_positive_val=FP16_MIN_SUBNORMAL, max_finite_val=FP16_MAX,
                keep_io_types=keep_io_types, op_block_list=op_block_list,
                node_block_list=sorted(nodes), disable_shape_infer=work.ByteSize() >= PROTO_LIMIT)
    except Exception as exc:  # noqa: BLE001 - the converter's failures become one line
        raise UsageError(f"{source}: onnxconverter-common could not convert the model: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
    original = set(names)
    retargeted = _retarget_casts(converted.graph, original - kept_set)
    _fold_round_trips(converted, original)
    if keep_io_types:
        _restore_float_outputs(converted, original_outputs, original)
    boundary = reconcile_dtypes(converted, kept_set, original - kept_set)
    return Conversion(model=converted, nodes=names, kept=kept, by_plan=by_plan,
                      retargeted_casts=sorted(no_op_casts + retargeted, key=names.index),
                      boundary_casts=boundary, clipped=clipped, tiny_weights=tiny)


def _lift_constants(graph):
    """Float ``Constant`` nodes → initializers of the same name (the converter treats
    initializers read only by kept nodes as fp32, Constant nodes never)."""
    lifted = []
    for node in graph.node:
        if node.op_type != "Constant" or len(node.attribute) != 1 or not node.output:
            continue
        attr = node.attribute[0]
        if attr.name == "value" and attr.t.data_type == FLOAT:
            tensor = numpy_helper.from_array(numpy_helper.to_array(attr.t), node.output[0])
        elif attr.name in ("value_float", "value_floats"):
            value = np.array(helper.get_attribute_value(attr), dtype=np.float32)
            tensor = numpy_helper.from_array(value, node.output[0])
        else:
            continue
        graph.initializer.append(tensor)
        lifted.append(node)
    for node in lifted:
        graph.node.remove(node)


def _drop_initializer_types(graph):
    """Initializers need no value_info; with one, the converter casts the initializer for a
    kept reader instead of leaving it fp32, and converts (clips) it after all."""
    names = {i.name for i in graph.initializer}
    keep = [vi for vi in graph.value_info if vi.name not in names]
    del graph.value_info[:]
    graph.value_info.extend(keep)


def _split_shared(graph, kept: set):
    """Give kept readers of a float initializer that converted nodes also read their own
    copy (``<name>_fp32``), so each side gets the dtype it expects."""
    readers = consumers(graph)
    copies = []
    for init in graph.initializer:
        if init.data_type != FLOAT:
            continue
        users = readers.get(init.name, [])
        mine = [n for n in users if n.name in kept]
        if not mine or len(mine) == len(users):
            continue
        copy = numpy_helper.from_array(numpy_helper.to_array(init), init.name + "_fp32")
        copies.append(copy)
        for node in mine:
            for i, name in enumerate(node.input):
                if name == init.name:
                    node.input[i] = copy.name
    graph.initializer.extend(copies)


def _clipped_constants(graph, kept: set):
    """([Clipped], tiny weight values): float initializers the conversion will change beyond
    rounding — those read by at least one converted node."""
    readers = consumers(graph)
    clipped, tiny = [], 0
    for init in graph.initializer:
        users = [n.name for n in readers.get(init.name, [])]
        if init.data_type != FLOAT or not users or all(u in kept for u in users):
            continue
        values = numpy_helper.to_array(init).astype(np.float64).ravel()
        magnitude = np.abs(values)
        big = magnitude > FP16_MAX
        small = (magnitude > 0) & (magnitude < FP16_MIN_SUBNORMAL)
        if big.any():
            worst = values[big][np.argmax(magnitude[big])]
            clipped.append(Clipped(init.name, users, "overflow", int(big.sum()), float(worst)))
        if small.any() and values.size <= SMALL_CONSTANT:
            worst = values[small][np.argmin(magnitude[small])]
            clipped.append(Clipped(init.name, users, "underflow", int(small.sum()), float(worst)))
        elif small.any():
            tiny += int(small.sum())
    return clipped, tiny


def _no_op_casts_to_identity(model) -> list[str]:
    """``Cast(to=float)`` of a float32 tensor → ``Identity``; their names."""
    types = elem_types(model)
    changed = []
    for node in model.graph.node:
        if node.op_type == "Cast" and node.input and types.get(node.input[0]) == FLOAT \
                and any(a.name == "to" and a.i == FLOAT for a in node.attribute):
            node.op_type = "Identity"
            del node.attribute[:]
            changed.append(node.name)
    return changed


def _fold_round_trips(model, original: set) -> None:
    """Inserted ``Cast(to=float16)`` → inserted ``Cast(to=float)`` of a float32 tensor: the
    readers of the second read the float32 tensor itself."""
    graph = model.graph
    types = elem_types(model)
    writers = {out: node for node in graph.node for out in node.output}
    outputs = {o.name for o in graph.output}
    dropped = set()
    for up in graph.node:
        down = writers.get(up.input[0]) if up.op_type == "Cast" and up.input else None
        if (up.name in original or _cast_to(up) != FLOAT or up.output[0] in outputs or down is None
                or down.op_type != "Cast" or down.name in original or _cast_to(down) != FLOAT16
                or types.get(down.input[0]) != FLOAT):
            continue
        for node in graph.node:
            node.input[:] = [down.input[0] if i == up.output[0] else i for i in node.input]
        dropped.add(up.name)
    read = {i for node in graph.node if node.name not in dropped for i in node.input}
    dropped |= {n.name for n in graph.node if n.op_type == "Cast" and n.name not in original
                and _cast_to(n) == FLOAT16 and n.output[0] not in read and n.output[0] not in outputs
                and types.get(n.input[0]) == FLOAT}
    keep = [n for n in graph.node if n.name not in dropped]
    del graph.node[:]
    graph.node.extend(keep)


def _cast_to(node):
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _retarget_casts(graph, converted: set) -> list[str]:
    """Converted ``Cast(to=float)`` nodes → ``Cast(to=float16)``; their names."""
    fixed = []
    for node in graph.node:
        if node.op_type == "Cast" and node.name in converted:
            for attr in node.attribute:
                if attr.name == "to" and attr.i == FLOAT:
                    attr.i = FLOAT16
                    fixed.append(node.name)
    return fixed


def _restore_float_outputs(model, original: dict, original_nodes: set):
    """With keep_io_types, outputs that were float32 stay float32: the converter leaves a
    kept node's output float16 (it casts the output down before it looks at outputs)."""
    graph = model.graph
    types = elem_types(model)
    writers = {out: node for node in graph.node for out in node.output}
    for output in graph.output:
        if original.get(output.name) != FLOAT or output.type.tensor_type.elem_type != FLOAT16:
            continue
        writer = writers.get(output.name)
        if (writer is not None and writer.op_type == "Cast" and writer.name not in original_nodes
                and types.get(writer.input[0]) == FLOAT):
            for attr in writer.attribute:  # the converter's cast down after a kept node
                if attr.name == "to":
                    attr.i = FLOAT
        else:
            low_name = output.name + "_fp16"
            for node in graph.node:
                node.output[:] = [low_name if o == output.name else o for o in node.output]
                node.input[:] = [low_name if i == output.name else i for i in node.input]
            graph.node.append(helper.make_node("Cast", [low_name], [output.name], to=FLOAT,
                                               name=output.name + "_cast_fp32"))
        output.type.tensor_type.elem_type = FLOAT
