"""Small hand-built ONNX graphs for the plan / convert / check tests (written to tmp dirs)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10  # what onnxruntime 1.2x loads; onnx's newest IR is ahead of it


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def build(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def save(model, directory, name="m.onnx") -> str:
    path = str(directory / name)
    onnx.save(model, path)
    return path


def exp_softmax_by_hand(directory, name="gate.onnx", scale=0.1) -> str:
    """x @ w / scale → Exp → ReduceSum → Div: a hand-written softmax without the max
    subtraction; its Exp overflows float16 once a logit / scale passes 11.09."""
    w = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32) * 0.3
    nodes = [helper.make_node("MatMul", ["x", "w"], ["logits"], name="/gate/MatMul"),
             helper.make_node("Div", ["logits", "t"], ["scaled"], name="/gate/Div"),
             helper.make_node("Exp", ["scaled"], ["e"], name="/gate/Exp"),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], name="/gate/ReduceSum", keepdims=1),
             helper.make_node("Div", ["e", "s"], ["y"], name="/gate/Div_1")]
    inits = [const("w", w), const("t", scale), const("axes", [-1], np.int64)]
    return save(build(nodes, [tensor("x", [32, 16])], [tensor("y", [32, 8])], inits), directory, name)


def masked_attention(directory, name="mask.onnx", fill=-1e9) -> str:
    """scores = q @ k^T; Where(mask, fill, scores) → Add bias → Softmax → @ v."""
    mask = np.triu(np.ones((8, 8), dtype=bool), 1)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0], name="/attn/Transpose"),
             helper.make_node("MatMul", ["x", "xt"], ["scores"], name="/attn/MatMul"),
             helper.make_node("Where", ["mask", "fill", "scores"], ["masked"], name="/attn/Where"),
             helper.make_node("Add", ["masked", "bias"], ["biased"], name="/attn/Add"),
             helper.make_node("Softmax", ["biased"], ["p"], axis=-1, name="/attn/Softmax"),
             helper.make_node("MatMul", ["p", "x"], ["y"], name="/attn/MatMul_1")]
    inits = [numpy_helper.from_array(mask, "mask"), const("fill", fill), const("bias", 0.5)]
    return save(build(nodes, [tensor("x", [8, 16])], [tensor("y", [8, 16])], inits), directory, name)


def scaled_logits(directory, name="logits.onnx", second_reader=False, overridable=False) -> str:
    """x @ x^T (head dim 64) → Div by 8 → Softmax → @ x. ``second_reader``: the MatMul's result
    is read by a ReduceMax too; ``overridable``: the divisor is also a graph input."""
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0], name="/attn/Transpose"),
             helper.make_node("MatMul", ["x", "xt"], ["scores"], name="/attn/MatMul"),
             helper.make_node("Div", ["scores", "c"], ["scaled"], name="/attn/Div"),
             helper.make_node("Softmax", ["scaled"], ["p"], axis=-1, name="/attn/Softmax"),
             helper.make_node("MatMul", ["p", "x"], ["y"], name="/attn/MatMul_1")]
    inputs, outputs = [tensor("x", [8, 64])], [tensor("y", [8, 64])]
    if second_reader:
        nodes.append(helper.make_node("ReduceMax", ["scores"], ["peak"], keepdims=0, name="/attn/ReduceMax"))
        outputs.append(tensor("peak", []))
    if overridable:
        inputs.append(tensor("c", []))
    return save(build(nodes, inputs, outputs, [const("c", 8.0)]), directory, name)


def exp_named_like_a_softmax(directory, name="clash.onnx") -> str:
    """An ``Exp`` whose exporter named it ``softmax_0``, then an unnamed ``Softmax``: the
    scheme that names unnamed nodes (canonical op + occurrence) would also say ``softmax_0``."""
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="softmax_0"),
             helper.make_node("Softmax", ["e"], ["y"], axis=-1)]
    return save(build(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])]), directory, name)


def untyped_square(directory=None, name="untyped.onnx"):
    """float16 x → com.microsoft Gelu → Mul (squared) → Div by 1000. onnx shape inference
    knows no com.microsoft op: the Gelu and the Mul results stay untyped. x = 300 squares
    to 90000, inf in float16. The model, or its path when ``directory`` is given."""
    nodes = [helper.make_node("Gelu", ["x"], ["g"], name="gelu", domain="com.microsoft"),
             helper.make_node("Mul", ["g", "g"], ["sq"], name="square"),
             helper.make_node("Div", ["sq", "k"], ["y"], name="scale")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [1], TensorProto.FLOAT16)],
                              [tensor("y", [1], TensorProto.FLOAT16)], [const("k", 1000, np.float16)])
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return save(model, directory, name) if directory is not None else model



def rms_norm_by_reciprocal(directory, name="rmsnorm.onnx") -> str:
    """x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)) * w → MatMul: an RMSNorm as the dynamo
    exporter writes ``x * torch.rsqrt(variance + eps)`` (T5, Llama), at opset 18 (the axes of
    ReduceMean an input)."""
    w = np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"], name="/norm/Pow"),
             helper.make_node("ReduceMean", ["sq", "axes"], ["var"], name="/norm/ReduceMean", keepdims=1),
             helper.make_node("Add", ["var", "eps"], ["var_eps"], name="/norm/Add"),
             helper.make_node("Sqrt", ["var_eps"], ["std"], name="/norm/Sqrt"),
             helper.make_node("Reciprocal", ["std"], ["inv"], name="/norm/Reciprocal"),
             helper.make_node("Mul", ["x", "inv"], ["normed"], name="/norm/Mul"),
             helper.make_node("Mul", ["gain", "normed"], ["scaled"], name="/norm/Mul_1"),
             helper.make_node("MatMul", ["scaled", "w"], ["y"], name="/proj/MatMul")]
    inits = [const("two", 2.0), const("axes", [-1], np.int64), const("eps", 1e-6),
             const("gain", np.ones(16)), const("w", w)]
    return save(build(nodes, [tensor("x", [8, 16])], [tensor("y", [8, 16])], inits, opset=18), directory, name)


def with_symbolic_dims(path: str, names=("batch", "sequence")) -> str:
    """The model at ``path`` saved beside it with its inputs' leading dims made symbolic
    (``batch``, ``sequence``: as an export with dynamic axes writes them; the last dim, the
    features, stays), its outputs' shapes left to inference and its inner shapes inferred
    again from the inputs: every dim that follows from a symbolic one is unknown too."""
    model = onnx.load(path)
    for vi in model.graph.input:
        for dim, name in zip(vi.type.tensor_type.shape.dim[:-1], names):
            dim.dim_param = name
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    model = onnx.shape_inference.infer_shapes(model)
    out = path[:-len(".onnx")] + "_symbolic.onnx"
    onnx.save(model, out)
    return out


def layer_norm_block(directory, name="layernorm.onnx") -> str:
    """LayerNormalization (axis -1, its scale a Constant node's ones: no learned affine) of a
    (batch, sequence, 16) input, a projection, then a mean over the tokens and a sum: every
    reduction and norm with unknown extents once ``with_symbolic_dims`` has made the batch and
    the sequence symbolic."""
    w = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32) * 0.3
    ones = helper.make_node("Constant", [], ["ones"], value=numpy_helper.from_array(np.ones(16, np.float32)))
    nodes = [ones, helper.make_node("LayerNormalization", ["x", "ones"], ["n"], axis=-1, name="/norm/LayerNormalization"),
             helper.make_node("MatMul", ["n", "w"], ["h"], name="/proj/MatMul"),
             helper.make_node("ReduceMean", ["h", "tokens"], ["pooled"], keepdims=0, name="/pool/ReduceMean"),
             helper.make_node("ReduceSum", ["pooled", "features"], ["y"], keepdims=0, name="/pool/ReduceSum")]
    inits = [const("w", w), const("tokens", [1], np.int64), const("features", [-1], np.int64)]
    return save(build(nodes, [tensor("x", [2, 8, 16])], [tensor("y", [2])], inits, opset=18), directory, name)
