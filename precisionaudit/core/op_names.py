"""The names torch calls go by, and which of them are casts, GEMMs or metadata queries.

A scan reports ops by these names, a plan names ops by them, and ``apply_plan`` and the
first-divergence probe match live calls against them: one table, so that a plan's
'F.softmax' or '__matmul__' means the same call everywhere. Torch-free (a watch log's plan
reads it); ``runtime.pytorch.ops.canonical_fn_name`` names a live torch function with it.
"""
from __future__ import annotations


def canonical_name(name: str) -> str:
    """The canonical op name of a function name: 'torch.Tensor.__rmul__' → 'mul'.

    Plans name ops this way, so ``apply_plan`` matches a hand-written 'F.softmax' or
    '__matmul__' to the same calls a scan reports as 'softmax' and 'matmul'.
    """
    name = name.rsplit(".", 1)[-1]
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith(("r", "i")) and name[1:] in _BINARY:
            name = name[1:]
    return _ALIASES.get(name, name)


#: user-level calls that are explicit casts (canonical names).
CAST_FNS = frozenset({"to", "float", "half", "bfloat16", "double", "type", "type_as"})

_BINARY = {"add", "sub", "mul", "truediv", "floordiv", "matmul", "pow", "mod", "and", "or", "xor"}
_ALIASES = {"truediv": "div", "floordiv": "div", "getitem": "getitem", "setitem": "setitem",
            "softmax": "softmax", "_softmax": "softmax", "multiply": "mul", "divide": "div",
            "subtract": "sub", "true_divide": "div"}

#: GEMMs and convolutions: the Tensor Core work a plan keeps in the low dtype unless it names
#: the call (``apply_plan`` hands them region-made fp32 values back in the low dtype; a plan
#: names one of several such calls in a module by its order, ``matmul#1``).
GEMM_OPS = frozenset("""
linear matmul mm bmm addmm baddbmm addbmm addmv addr mv einsum chain_matmul multi_dot
linalg_multi_dot linalg_vecdot tensordot bilinear prelu conv1d conv2d conv3d conv_tbc
conv_transpose1d conv_transpose2d conv_transpose3d convolution scaled_dot_product_attention
lstm gru rnn_tanh rnn_relu lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
""".split())

#: metadata queries: never worth an upcast copy.
QUERIES = frozenset("""
size dim numel stride element_size is_floating_point is_complex is_contiguous data_ptr
storage_offset nelement ndimension is_same_size get_device __len__ len
""".split())
