"""CUDA's autocast policy, op by op, and aten op names: data, no torch.

The lists are PyTorch's ``autocast_mode.cpp`` (aten overload names). The torch frontend
registers kernels that apply them on CPU (``runtime.pytorch.cuda_autocast``); the dtype
pass names the list an op falls in to explain its dtype, for ONNX models too.
"""
from __future__ import annotations

from .op_names import canonical_name

# CUDA autocast policy, op by op (aten overload names as in autocast_mode.cpp).
LOWER_PRECISION_FP = """
_convolution _convolution.deprecated conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul
einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot
_thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
_scaled_dot_product_flash_attention scaled_dot_product_attention cudnn_convolution
cudnn_convolution_transpose
""".split()
# cuDNN's RNNs (nn.LSTM/GRU/RNN on CUDA: _cudnn_rnn) are cast by their own wrapper
# (aten/src/ATen/cudnn/AutocastRNN.cpp, _cudnn_rnn_cast_reflatten, not in the lists above)
# to float16 whatever the autocast dtype: on an H200 (torch 2.11+cu130) an LSTM under
# bfloat16 autocast read and returned float16 (bench/gpu_truth.py, table 1). On CPU,
# mkldnn_rnn_layer is nn.LSTM/GRU's kernel and stands in for it.
HALF = ["mkldnn_rnn_layer"]
CPU_STAND_INS = {"mkldnn_rnn_layer"}
FP32 = """
acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan
pow.Tensor_Scalar pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm
group_norm frobenius_norm.dim nuclear_norm nuclear_norm.dim cosine_similarity
poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div
l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss
soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits
dist pdist cdist renorm logsumexp rms_norm upsample_nearest1d upsample_nearest2d
upsample_nearest3d _upsample_nearest_exact1d _upsample_nearest_exact2d
_upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa
upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa
""".split()
FP32_SET_OPT_DTYPE = """
prod prod.dim_int softmax.int log_softmax.int cumprod cumsum linalg_vector_norm
linalg_matrix_norm linalg_matrix_norm.str_ord sum sum.dim_IntList
""".split()
FP32_APPEND_DTYPE = ["norm.Scalar", "norm.ScalarOpt_dim"]
PROMOTE = """
addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put scatter_add tensordot
""".split()
BANNED = ["binary_cross_entropy"]

POLICY: dict[str, str] = {}
for _names, _kind in ((LOWER_PRECISION_FP, "lower_precision_fp"), (FP32, "fp32"),
                      (FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype"),
                      (FP32_APPEND_DTYPE, "fp32_append_dtype"), (PROMOTE, "promote"),
                      (BANNED, "banned"), (HALF, "half")):
    POLICY.update(dict.fromkeys(_names, _kind))

#: the calls (canonical names) whose result CUDA autocast returns in fp32 (exp, softmax, sum,
#: layer_norm, ...): such a result is fp32 with or without a plan's region
FP32_CALLS = frozenset(canonical_name(op.partition(".")[0]) for op, kind in POLICY.items() if kind.startswith("fp32"))

BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast. "
    "Many models use a sigmoid layer right before the binary cross entropy layer. In this "
    "case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits "
    "or torch.nn.BCEWithLogitsLoss."
)


def aten_short(target: str) -> str:
    """'aten._softmax.default' → '_softmax'."""
    parts = target.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else parts[0]
