"""Give every tensor of a converted ONNX model the dtype its writer computes and its readers expect.

onnxconverter-common decides where to cast from the graph's declarations, not from what
each node computes. It casts in front of a kept node only the inputs that have a
value_info or graph-input entry (not a graph output, not a tensor shape inference left
untyped), and with ``keep_io_types`` it casts a graph output up to float32 under the
output's own name while that output's other readers go on reading the name as float16.
Either way a node is handed the other dtype than the one it was declared to compute: an
exported BERT's pooler ``Gather`` reads the float32 ``last_hidden_state`` and declares a
float16 result, which onnxruntime refuses ("Type (tensor(float16)) of output arg ... does
not match expected type (tensor(float))") and strict type inference too.

``reconcile_dtypes`` trusts no declaration. It walks the graph in topological order,
knowing each tensor's real element type (inputs, initializers, then each node's outputs as
ONNX type inference computes them from the real input types), and

* hands each node of the original graph its float data inputs (the inputs its schema types
  like an output, ``T``) in the dtype the node runs in: float32 for a kept node, float16
  for a converted one; a Cast goes in front where they differ, or, where the tensor is the
  converter's cast of a tensor already in that dtype, the node reads that tensor instead;
* casts an input its schema does not allow in its real dtype (a float16 ``scales``) to
  the float type it allows;
* casts a graph output whose real dtype is not the declared one, under the output's name;
* writes every tensor's real dtype into its value_info.

The converter's own nodes (its Casts) are left as they are; nodes with subgraphs and
custom-domain ops without a schema keep their inputs and their declared output types.
"""
from __future__ import annotations

from collections import defaultdict, deque

from onnx import IR_VERSION, defs, helper, shape_inference

from .graph import FLOAT, FLOAT16, producers

OTHER = {FLOAT: FLOAT16, FLOAT16: FLOAT}
TYPE_NAME = {FLOAT: "tensor(float)", FLOAT16: "tensor(float16)"}
SUFFIX = {FLOAT: "fp32", FLOAT16: "fp16"}


def reconcile_dtypes(model, kept: set, converted: set) -> list[str]:
    """Make ``model``'s dtypes consistent (in place); ``kept`` and ``converted`` name the
    original graph's nodes that run in float32 and float16. Returns the Casts it inserted."""
    graph = model.graph
    opsets = {(o.domain or ""): o.version for o in model.opset_import}
    real = {vi.name: vi.type.tensor_type.elem_type for vi in graph.input}
    real.update({init.name: init.data_type for init in graph.initializer})
    declared = {vi.name: vi for vi in [*graph.value_info, *graph.output]}
    writers = producers(graph)
    original = kept | converted
    taken = set(real) | set(declared) | {t for n in graph.node for t in [n.name, *n.input, *n.output]}
    casts: dict[tuple[str, int], str] = {}
    inserted: list = []
    order = []

    def cast(name: str, to: int) -> str:
        """``name`` in dtype ``to``: the converter's cast source, or a new Cast before the reader."""
        if (name, to) not in casts:
            writer = writers.get(name)
            if (writer is not None and writer.op_type == "Cast" and writer.name not in original
                    and real.get(writer.input[0]) == to):
                casts[name, to] = writer.input[0]
            else:
                out = _unique(f"{name}_{SUFFIX[to]}", taken)
                node = helper.make_node("Cast", [name], [out], to=to, name=out)
                order.append(node)
                inserted.append(node)
                real[out] = to
                _declare(graph, declared, name, out, to)
                casts[name, to] = out
        return casts[name, to]

    for node in _topological(graph):
        schema = _schema(node, opsets)
        if node.name in original and schema is not None and not _has_subgraph(node):
            want = FLOAT if node.name in kept else FLOAT16
            for index, name, allowed, bound in _float_inputs(schema, node):
                have = real.get(name)
                if have not in OTHER:
                    continue
                if bound and have != want and TYPE_NAME[want] in allowed:
                    node.input[index] = cast(name, want)
                elif TYPE_NAME[have] not in allowed and TYPE_NAME[OTHER[have]] in allowed:
                    node.input[index] = cast(name, OTHER[have])
        order.append(node)
        for name, elem in _output_types(node, schema, real, declared, model).items():
            real[name] = elem

    for output in graph.output:
        want, have = output.type.tensor_type.elem_type, real.get(output.name)
        writer = writers.get(output.name)
        if want in OTHER and have in OTHER and have != want and writer is not None:
            low = _unique(f"{output.name}_{SUFFIX[have]}", taken)
            for node in order:
                node.output[:] = [low if o == output.name else o for o in node.output]
                node.input[:] = [low if i == output.name else i for i in node.input]
            node = helper.make_node("Cast", [low], [output.name], to=want, name=low + "_to_output")
            order.append(node)
            inserted.append(node)
            real[low] = have
            _declare(graph, declared, output.name, low, have)

    for vi in graph.value_info:
        have = real.get(vi.name)
        if have in OTHER and vi.type.tensor_type.elem_type in OTHER:
            vi.type.tensor_type.elem_type = have
    del graph.node[:]
    graph.node.extend(order)
    return [n.name for n in inserted]


def _topological(graph) -> list:
    """The nodes in an order where every tensor is written before it is read (graph order
    where it already is; a cycle or a tensor no one writes leaves the rest as they are)."""
    writers = producers(graph)
    waiting = defaultdict(list)
    missing = {}
    for index, node in enumerate(graph.node):
        needs = {i for i in node.input if i and i in writers and writers[i] is not node}
        missing[index] = len(needs)
        for name in needs:
            waiting[name].append(index)
    ready = deque(i for i, count in missing.items() if count == 0)
    order, done = [], set()
    while ready:
        index = ready.popleft()
        done.add(index)
        order.append(graph.node[index])
        for name in graph.node[index].output:
            for reader in waiting.pop(name, ()):
                missing[reader] -= 1
                if missing[reader] == 0:
                    ready.append(reader)
    order.extend(n for i, n in enumerate(graph.node) if i not in done)
    return order


def _schema(node, opsets):
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    try:
        return defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except Exception:  # noqa: BLE001 - a custom op: no schema, nothing to reconcile
        return None


def _has_subgraph(node) -> bool:
    return any(a.HasField("g") or len(a.graphs) for a in node.attribute)


def _float_inputs(schema, node):
    """(index, name, allowed types, bound to an output's type) of each named input."""
    formal = list(schema.inputs)
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    output_params = {o.type_str for o in schema.outputs}
    for index, name in enumerate(node.input):
        if not name or not formal:
            continue
        param = formal[min(index, len(formal) - 1)].type_str
        allowed = constraints.get(param, {param})
        yield index, name, allowed, param in constraints and param in output_params


def _output_types(node, schema, real, declared, model) -> dict[str, int]:
    """Output name → element type: ONNX type inference on the real input types where it
    answers, else the declared type."""
    types = {}
    inputs = [i for i in node.input if i]
    if schema is not None and all(real.get(i) for i in inputs):
        try:
            inferred = shape_inference.infer_node_outputs(
                schema, node, {i: helper.make_tensor_type_proto(real[i], None) for i in inputs},
                opset_imports=list(model.opset_import), ir_version=model.ir_version or IR_VERSION)
            types = {name: t.tensor_type.elem_type for name, t in inferred.items()
                     if t.HasField("tensor_type") and t.tensor_type.elem_type}
        except Exception:  # noqa: BLE001 - inference refused: the declarations stand
            types = {}
    for name in node.output:
        if name and name not in types and name in declared:
            elem = declared[name].type.tensor_type.elem_type
            if elem:
                types[name] = elem
    return types


def _unique(name: str, taken: set) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _declare(graph, declared: dict, like: str, name: str, elem: int) -> None:
    """A value_info for ``name``: ``like``'s shape (where known) with element type ``elem``."""
    vi = graph.value_info.add()
    if like in declared:
        vi.CopyFrom(declared[like])
    vi.name = name
    vi.type.tensor_type.elem_type = elem
    declared[name] = vi
