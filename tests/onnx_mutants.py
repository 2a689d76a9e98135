"""Seeded mutations of small ONNX graphs: malformed-but-loadable files, as an attacker (or a
broken exporter) would write them. Used by tests/test_onnx_fuzz.py and bench/onnx_fuzz.py.

Every mutant is a function of (seed graph, integer seed): the same seed gives the same
file, so a failure is reproduced with its number. Dims stay small or absurd (2^40, never
2^30): a mutant must not make the check allocate gigabytes to prove a point.
"""
from __future__ import annotations

import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_graphs import IR_VERSION, const, tensor

#: mutants in every test run (tests/test_onnx_fuzz.py) and bench/fuzz.py's default
MUTANTS = 200
ODD_DIMS = [0, 1, 3, 7, -1, -5, 2**40, 2**63 - 1]
ODD_LITERALS = ["1", "'abc'", "[1, 2]", "[]", "['a']", "{'a': 1}", "None", "[[1], 'x']", "((", "[b'x', 'y']",
                "'" + "x" * 300 + "'", "[" * 200 + "]" * 200, "1e309", "[None, None]"]
OPS = ["Softmax", "ReduceSum", "ReduceMean", "MatMul", "Gemm", "Conv", "Gather", "Cast",
       "LayerNormalization", "Exp", "Log", "Add", "Where", "Transpose", "Reshape", "Foo", "", "Attention",
       "CumSum", "LSTM", "Einsum", "Constant", "Identity", "SoftmaxCrossEntropyLoss"]
ELEM_TYPES = [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 16, 99]


def rich_graph() -> onnx.ModelProto:
    """Embedding → LayerNorm → attention-like MatMul/Softmax → ReduceMean → Conv, with the
    dynamo exporter's metadata: what the mutations have to chew on."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="/embed/Gather"),
        helper.make_node("LayerNormalization", ["emb", "ln_w", "ln_b"], ["h"], axis=-1, name="/ln/LN"),
        helper.make_node("MatMul", ["h", "wq"], ["q"], name="/attn/q/MatMul"),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1], name="/attn/Transpose"),
        helper.make_node("MatMul", ["q", "qt"], ["scores"], name="/attn/MatMul"),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1, name="/attn/Softmax"),
        helper.make_node("MatMul", ["p", "h"], ["ctx"], name="/attn/MatMul_1"),
        helper.make_node("ReduceSum", ["ctx", "axes"], ["m"], keepdims=1, name="/pool/ReduceSum"),
        helper.make_node("Unsqueeze", ["m", "ax0"], ["m4"], name="/pool/Unsqueeze"),
        helper.make_node("Conv", ["m4", "conv_w"], ["y"], name="/head/Conv"),
    ]
    for node in nodes:
        scope = node.name.split("/")[1]
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", scope, node.op_type]))
        node.metadata_props.add(key="pkg.torch.onnx.stack_trace",
                                value=f'File "/x/model.py", line {len(node.name)}, in forward')
    inits = [const("table", rng.standard_normal((50, 16))), const("ln_w", np.ones(16)),
             const("ln_b", np.zeros(16)), const("wq", rng.standard_normal((16, 16))),
             const("axes", [-1], np.int64), const("ax0", [1], np.int64),
             const("conv_w", rng.standard_normal((4, 1, 1, 1)))]
    graph = helper.make_graph(nodes, "rich", [tensor("ids", [2, 8], TensorProto.INT64)],
                              [tensor("y", [2, 4, 8, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _names(model):
    produced = [o for n in model.graph.node for o in n.output]
    return produced + [i.name for i in model.graph.input] + [i.name for i in model.graph.initializer]


def _metadata(model, rng):
    node = rng.choice(model.graph.node)
    key = rng.choice(["pkg.torch.onnx.name_scopes", "pkg.torch.onnx.stack_trace"])
    value = rng.choice(ODD_LITERALS) if key.endswith("scopes") else rng.choice(
        ['File "x", line abc, in f', 'File "', "File", 'File "/x.py", line 99999999999999999999, in f'])
    del node.metadata_props[:]
    node.metadata_props.add(key=key, value=value)


def _initializer_dims(model, rng):
    init = rng.choice(model.graph.initializer)
    dims = list(init.dims)
    choice = rng.randrange(4)
    if choice == 0 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(ODD_DIMS)
    elif choice == 1:
        dims.append(rng.choice([1, 2, 3]))
    elif choice == 2 and dims:
        dims.pop()
    else:
        dims = [rng.choice([2, 5, 8])] * rng.randrange(1, 4)
    del init.dims[:]
    init.dims.extend(dims)


def _initializer_type(model, rng):
    rng.choice(model.graph.initializer).data_type = rng.choice(ELEM_TYPES)


def _initializer_data(model, rng):
    init = rng.choice(model.graph.initializer)
    try:
        data = numpy_helper.to_array(init).tobytes()
    except (ValueError, KeyError):  # an earlier mutation broke it already
        data = init.raw_data
    init.ClearField("float_data")
    init.ClearField("int64_data")
    init.raw_data = data[: rng.randrange(max(1, len(data)))]


def _value_info(model, rng):
    infos = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    info = rng.choice(infos)
    t = info.type.tensor_type
    choice = rng.randrange(4)
    if choice == 0 and t.shape.dim:
        dim = t.shape.dim[rng.randrange(len(t.shape.dim))]
        if rng.random() < 0.3:
            dim.dim_param = rng.choice(["batch", "", "x" * 50])
        else:
            dim.dim_value = rng.choice(ODD_DIMS)
    elif choice == 1:
        t.ClearField("shape")
    elif choice == 2:
        t.elem_type = rng.choice(ELEM_TYPES)
    else:
        t.shape.dim.add().dim_value = rng.choice([1, 2, 3])


def _rewire(model, rng):
    """An input renamed: to a later node's output (a cycle), a missing name or nothing."""
    node = rng.choice(model.graph.node)
    if not node.input:
        return
    index = rng.randrange(len(node.input))
    node.input[index] = rng.choice([*_names(model), "missing", ""])


def _op_type(model, rng):
    rng.choice(model.graph.node).op_type = rng.choice(OPS)


def _attribute(model, rng):
    node = rng.choice(model.graph.node)
    name = rng.choice(["axis", "axes", "perm", "to", "keepdims", "group", "transB", "stash_type", "value"])
    del node.attribute[:]
    kind = rng.randrange(5)
    if kind == 0:
        node.attribute.append(helper.make_attribute(name, rng.choice([0, -1, 5, -9, 2**40])))
    elif kind == 1:
        node.attribute.append(helper.make_attribute(name, [rng.choice([0, -1, 7, 2**40])] * rng.randrange(1, 4)))
    elif kind == 2:
        node.attribute.append(helper.make_attribute(name, rng.choice([1.5, float("nan")])))
    elif kind == 3:
        node.attribute.append(helper.make_attribute(name, rng.choice(["x", ""])))
    else:
        node.attribute.append(helper.make_attribute(name, helper.make_tensor("t", rng.choice(
            [TensorProto.FLOAT, TensorProto.STRING, TensorProto.INT64]), [0], [])))


def _drop_or_duplicate(model, rng):
    nodes = model.graph.node
    index = rng.randrange(len(nodes))
    if rng.random() < 0.5:
        del nodes[index]
    else:
        nodes.add().CopyFrom(nodes[index])


def _domain(model, rng):
    rng.choice(model.graph.node).domain = rng.choice(["com.microsoft", "x", "ai.onnx.ml"])


def _outputs(model, rng):
    node = rng.choice(model.graph.node)
    if rng.random() < 0.5:
        del node.output[:]
    else:
        node.output.append(rng.choice(_names(model)))


MUTATIONS = [_metadata, _initializer_dims, _initializer_type, _initializer_data, _value_info, _rewire,
             _op_type, _attribute, _drop_or_duplicate, _domain, _outputs]


def _flip_bytes(data: bytes, rng) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def mutant(seed_model: onnx.ModelProto, seed: int) -> tuple[bytes, str]:
    """(serialized mutant, what was done to it)."""
    rng = random.Random(seed)
    model = onnx.ModelProto()
    model.CopyFrom(seed_model)
    done = []
    for _ in range(rng.randrange(1, 4)):
        if not model.graph.node:
            break
        mutation = rng.choice(MUTATIONS)
        mutation(model, rng)
        done.append(mutation.__name__.strip("_"))
    data = model.SerializeToString()
    if rng.random() < 0.15:
        data = _flip_bytes(data, rng)
        done.append("flip_bytes")
    return data, "+".join(done)


COMMANDS = {
    "scan": lambda m, out: ["scan", m, "--format", "json"],
    "explain": lambda m, out: ["explain", m],
    "plan": lambda m, out: ["plan", m, "-o", out + ".yaml"],
    "convert": lambda m, out: ["convert", m, "-o", out + ".onnx"],
    "check": lambda m, out: ["check", m, "--format", "json"],
}


def seed_models(scratch) -> list[onnx.ModelProto]:
    """The graphs mutant N starts from (N % 3): rich_graph and two of tests/onnx_graphs."""
    from onnx_graphs import exp_softmax_by_hand, masked_attention

    return [rich_graph(), onnx.load(exp_softmax_by_hand(scratch)), onnx.load(masked_attention(scratch))]


def run_mutant(number: int, seeds, commands, scratch, limit_s: float = 60.0):
    """Mutant ``number`` through each of ``commands``, each in a fresh folder under
    ``scratch``: [(command, verdict, detail, what the mutation did, seconds)]."""
    import pathlib
    import tempfile
    import time

    data, what = mutant(seeds[number % len(seeds)], number)
    verdicts = []
    for command in commands:
        workdir = pathlib.Path(tempfile.mkdtemp(dir=scratch))
        path = workdir / "m.onnx"
        path.write_bytes(data)
        started = time.perf_counter()
        verdict, detail = judge(str(path), command, str(workdir), limit_s)
        verdicts.append((command, verdict, detail, what, time.perf_counter() - started))
    return verdicts


def judge(path: str, command: str, workdir: str, limit_s: float = 60.0) -> tuple[str, str]:
    """(verdict, detail) of one command on one model file in ``workdir`` (tests/fuzzing.py)."""
    import os

    from fuzzing import judge as judge_argv

    out = os.path.join(workdir, "out")
    return judge_argv(COMMANDS[command](path, out), workdir, {out + ".yaml": "plan", out + ".onnx": "onnx"},
                      limit_s)
