"""Kernel numerics: the dtype each PyTorch kernel accumulates in for fp16/bf16 inputs.

A tensor's dtype says how values are *stored*; what a kernel *accumulates* in is a
property of its source. CUDA's fused softmax, norms and reductions keep their running
max/sum/mean/variance in ``acc_type<scalar_t, true>`` (float for Half and BFloat16),
and tensor-core GEMMs accumulate in fp32, so a pure-fp16 softmax or GroupNorm is not an
accumulation hazard. Scans (cumsum/cumprod) are the exception on CUDA: they carry the
running value in ``scalar_t``.

Each entry: the ops it covers (user-level op and aten names), what it accumulates in on
CUDA and on CPU (``"float32"``, or ``"input"`` = the input's own dtype), and the PyTorch
source that shows it (paths under ``aten/src/ATen/``, torch 2.x).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.numerics import LOW_PRECISION_NAMES as LOW
from ..core.target import Target
from .facts import KernelFacts


@dataclass(frozen=True)
class Kernel:
    ops: tuple
    cuda: str
    cpu: str
    source: str
    note: str = ""


KERNELS = (
    Kernel(("softmax", "_softmax", "log_softmax", "_log_softmax", "softmin"), "float32", "float32",
           "native/cuda/SoftMax.cu (accscalar_t = acc_type<scalar_t, true>); "
           "native/cpu/SoftMaxKernel.cpp (vec softmax in opmath_type)",
           "max and sum in fp32, probabilities stored in the input dtype"),
    Kernel(("layer_norm", "native_layer_norm"), "float32", "float32",
           "native/cuda/layer_norm_kernel.cu (T_ACC = acc_type<T, true>); "
           "native/cpu/layer_norm_kernel.cpp (opmath_t, mixed-type path)"),
    Kernel(("rms_norm", "_fused_rms_norm"), "float32", "float32",
           "native/cuda/layer_norm_kernel.cu (_fused_rms_norm, T_ACC); "
           "native/layer_norm.cpp (rms_norm_composite upcasts to opmath_type)"),
    Kernel(("group_norm", "native_group_norm"), "float32", "float32",
           "native/cuda/group_norm_kernel.cu (T_ACC = acc_type<T, true>); "
           "native/cpu/group_norm_kernel.cpp (opmath_t)"),
    Kernel(("batch_norm", "native_batch_norm", "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training", "cudnn_batch_norm", "instance_norm"),
           "float32", "float32",
           "native/cuda/Normalization.cuh (accscalar_t = at::acc_type<scalar_t, true>; Welford "
           "in accscalar_t); native/Normalization.cpp (instance_norm runs batch_norm); "
           "cudnn/BatchNorm.cpp (fp32 scale/bias/statistics for half inputs)"),
    Kernel(("sum", "nansum", "prod", "mean", "nanmean", "logsumexp"), "float32", "float32",
           "native/cuda/ReduceSumProdKernel.cu (sum_functor<Half, float, Half>, prod in "
           "opmath); native/cuda/ReduceMomentKernel.cu (mean_kernel_impl<Half, float>); "
           "native/cpu/SumKernel.cpp (cascade_sum, acc_t = opmath_type); native/ReduceOps.cpp "
           "(logsumexp = amax + log(sum(exp(x - amax))))",
           "the result is stored in the input dtype"),
    Kernel(("var", "std", "var_mean", "std_mean"), "float32", "float32",
           "native/cuda/ReduceMomentKernel.cu (std_var_kernel_impl<Half, float>, Welford); "
           "native/cpu/ReduceOpsKernel.cpp (std_var_kernel, opmath)"),
    Kernel(("norm", "linalg_vector_norm"), "float32", "float32",
           "native/cuda/ReduceNormKernel.cu (norm_kernel_cuda_impl<Half, float>); "
           "native/cpu/ReduceOpsKernel.cpp (norm_kernel_tensor_iterator_impl, acc_type)"),
    Kernel(("cumsum", "cumprod", "logcumsumexp"), "input", "float32",
           "native/cuda/CumsumKernel.cu, CumprodKernel.cu (scan_dim<scalar_t> with "
           "std::plus<scalar_t>: the running value is scalar_t, native/cuda/ScanUtils.cuh); "
           "native/cpu/ReduceOpsKernel.cpp (cumsum_cpu_kernel, at::acc_type<scalar_t, false>)",
           "the running total is rounded to the input dtype at every step on CUDA"),
    Kernel(("avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
            "adaptive_avg_pool3d", "_adaptive_avg_pool2d"), "float32", "float32",
           "native/cuda/AveragePool2d.cu, AdaptiveAveragePooling.cu (accscalar_t = acc_type)"),
    Kernel(("linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum"),
           "float32", "float32",
           "cuda/CUDABlas.cpp (cublasGemmEx/cublasLt with CUBLAS_COMPUTE_32F for Half and "
           "BFloat16; torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction only "
           "lets split-K reduce partial sums in fp16); native/cpu/BlasKernel.cpp (opmath_t)"),
    Kernel(("_grouped_mm", "grouped_mm"), "float32", "float32",
           "native/cuda/GroupedBlas.cpp (bf16bf16_grouped_mm: CUTLASS with float accumulators; "
           "otherwise _grouped_mm_fallback, a loop of mm/bmm through CUDABlas.cpp)"),
    Kernel(("conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "_convolution", "cudnn_convolution"), "float32", "float32",
           "native/cudnn/ConvShared.cpp / cudnn/Descriptors.h (ConvolutionDescriptor: "
           "CUDNN_DATA_FLOAT compute type for half inputs)"),
    Kernel(("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
           "float32", "float32",
           "native/transformers/cuda/flash_attn (fp32 accumulators and online softmax), "
           "native/transformers/cuda/mem_eff_attention (accum_t = float)"),
    Kernel(("cross_entropy", "nll_loss", "nll_loss_nd", "nll_loss2d"), "float32", "float32",
           "native/cuda/Loss.cu, NLLLoss2d.cu (accscalar_t = at::acc_type<scalar_t, true>); "
           "cross_entropy = log_softmax (SoftMax.cu) + nll_loss"),
)

_BY_OP = {op: kernel for kernel in KERNELS for op in kernel.ops}

#: eval-mode batch norm normalises with the running statistics: it computes none itself
NO_STATISTICS = {"_native_batch_norm_legit_no_training"}
#: batch norm kernels whose first bool argument is ``training``
BATCH_NORMS = {"native_batch_norm", "_native_batch_norm_legit", "cudnn_batch_norm", "batch_norm"}


def computes_statistics(node) -> bool:
    """False for eval-mode batch norm (running statistics), True for every other node."""
    atens = node.get("atens", ())
    if any(a in NO_STATISTICS for a in atens):
        return False
    if any(a in BATCH_NORMS for a in atens) and node.get("flags"):
        return bool(node["flags"][0])
    return True


def kernel_of(node) -> Kernel | None:
    """The table entry of a PyTorch node (by user-level op, then by its aten ops)."""
    if not str(node.get("target", "")).startswith("aten."):
        return None  # ONNX nodes run ONNX Runtime's kernels: not described here
    for name in (node["op"], *node.get("atens", ())):
        if name in _BY_OP:
            return _BY_OP[name]
    return None


def accumulate_dtype(node, device: str) -> str | None:
    """What the node's kernel accumulates in; None when the table does not know it."""
    kernel = kernel_of(node)
    compute = node["compute_dtype"]
    if kernel is None or compute is None:
        return None
    rule = kernel.cuda if device == "cuda" else kernel.cpu
    if rule == "input" or compute not in LOW:
        return compute  # fp32 inputs accumulate in fp32 (or wider) everywhere
    return rule


def annotate(graph):
    device = (graph.graph.get("target") or Target()).device
    for _, node in graph.nodes(data=True):
        kernel = kernel_of(node)
        node["kernel"] = KernelFacts(accumulate_dtype=accumulate_dtype(node, device),
                                     source=kernel.source if kernel else None,
                                     computes_statistics=computes_statistics(node))
