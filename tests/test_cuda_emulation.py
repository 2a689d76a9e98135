"""The emulated CUDA autocast policy agrees with PyTorch's real CUDA autocast kernels.

Fake CUDA tensors run the real AutocastCUDA kernels for plain aten ops without a GPU
(DESIGN.md), so each op below is run both ways and the result dtypes compared.
"""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from precisionaudit.core.autocast_policy import CPU_STAND_INS, POLICY
from precisionaudit.runtime.pytorch.cuda_autocast import emulated_cuda_autocast

LOW = [torch.float16, torch.bfloat16]

# name -> fn(a, b, v, i) with a, b: (8, 8) floats, v: (8,) float, i: (8,) int64 indices
OPS = {
    "mm": lambda a, b, v, i: torch.mm(a, b),
    "matmul": lambda a, b, v, i: a @ b,
    "bmm": lambda a, b, v, i: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "baddbmm": lambda a, b, v, i: torch.baddbmm(a.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0)),
    "addmm": lambda a, b, v, i: torch.addmm(v, a, b),
    "linear": lambda a, b, v, i: F.linear(a, b, v),
    "einsum": lambda a, b, v, i: torch.einsum("ij,jk->ik", a, b),
    "mv": lambda a, b, v, i: torch.mv(a, v),
    "conv1d": lambda a, b, v, i: F.conv1d(a.unsqueeze(0), b.unsqueeze(-1)),
    "softmax": lambda a, b, v, i: a.softmax(-1),
    "softmax_dtype": lambda a, b, v, i: a.softmax(-1, dtype=torch.float16),
    "log_softmax": lambda a, b, v, i: F.log_softmax(a, -1),
    "exp": lambda a, b, v, i: a.exp(),
    "log": lambda a, b, v, i: a.log(),
    "rsqrt": lambda a, b, v, i: a.rsqrt(),
    "pow": lambda a, b, v, i: a.pow(2),
    "reciprocal": lambda a, b, v, i: a.reciprocal(),
    "softplus": lambda a, b, v, i: F.softplus(a),
    "layer_norm": lambda a, b, v, i: F.layer_norm(a, (8,)),
    "group_norm": lambda a, b, v, i: F.group_norm(a.unsqueeze(0), 2),
    "rms_norm": lambda a, b, v, i: F.rms_norm(a, (8,)),
    "sum": lambda a, b, v, i: a.sum(),
    "sum_dim": lambda a, b, v, i: a.sum(-1),
    "cumsum": lambda a, b, v, i: a.cumsum(0),
    "prod": lambda a, b, v, i: a.prod(),
    "norm": lambda a, b, v, i: a.norm(),
    "norm_dim": lambda a, b, v, i: a.norm(dim=1),
    "vector_norm": lambda a, b, v, i: torch.linalg.vector_norm(a),
    "logsumexp": lambda a, b, v, i: a.logsumexp(-1),
    "mean": lambda a, b, v, i: a.mean(),
    "var": lambda a, b, v, i: a.var(-1),
    "tanh": lambda a, b, v, i: a.tanh(),
    "add": lambda a, b, v, i: a + b,
    "mse_loss": lambda a, b, v, i: F.mse_loss(a, b),
    "nll_loss": lambda a, b, v, i: F.nll_loss(a, i),
    "cross_entropy": lambda a, b, v, i: F.cross_entropy(a, i),
    "bce_with_logits": lambda a, b, v, i: F.binary_cross_entropy_with_logits(a, b),
    "cosine_similarity": lambda a, b, v, i: F.cosine_similarity(a, b),
    "cdist": lambda a, b, v, i: torch.cdist(a, b),
    "addcmul": lambda a, b, v, i: torch.addcmul(a, b, b),
    "dot": lambda a, b, v, i: torch.dot(v, v),
    "scatter_add": lambda a, b, v, i: a.scatter_add(0, i.unsqueeze(0).expand(8, 8), b),
    "upsample_nearest": lambda a, b, v, i: F.interpolate(a.unsqueeze(0).unsqueeze(0), scale_factor=2),
    "sdpa": lambda a, b, v, i: F.scaled_dot_product_attention(a.unsqueeze(0), b.unsqueeze(0), b.unsqueeze(0)),
    "binary_cross_entropy": lambda a, b, v, i: F.binary_cross_entropy(a.sigmoid(), b.sigmoid()),
}


def _outcome(fn, *tensors):
    try:
        return fn(*tensors).dtype
    except RuntimeError as exc:
        return "raises: " + str(exc).split("\n")[0][:40]


def real_cuda_dtype(fn, in_dtype, low):
    mode = FakeTensorMode()

    def fake(shape, dtype):
        return FakeTensor(mode, torch.empty(shape, dtype=dtype, device="meta"), torch.device("cuda"))

    args = (fake((8, 8), in_dtype), fake((8, 8), in_dtype), fake((8,), in_dtype), fake((8,), torch.int64))
    enabled, dtype = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", low)
    try:
        with mode:
            return _outcome(fn, *args)
    finally:
        torch.set_autocast_enabled("cuda", enabled)
        torch.set_autocast_dtype("cuda", dtype)


def emulated_dtype(fn, in_dtype, low):
    args = (torch.rand(8, 8, dtype=in_dtype), torch.rand(8, 8, dtype=in_dtype),
            torch.rand(8, dtype=in_dtype), torch.randint(0, 8, (8,)))
    with FakeTensorMode(allow_non_fake_inputs=True), emulated_cuda_autocast(low):
        return _outcome(fn, *args)


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("in_dtype", ["float32", "low"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_emulated_policy_matches_real_cuda_kernels(name, in_dtype, low):
    dtype = torch.float32 if in_dtype == "float32" else low
    assert emulated_dtype(OPS[name], dtype, low) == real_cuda_dtype(OPS[name], dtype, low)


def test_policy_covers_every_op_cuda_autocast_handles():
    names = torch._C._dispatch_get_all_op_names()
    cuda_ops = {n.split("::", 1)[1] for n in names if n.startswith("aten::")
                and torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCUDA")}
    # a build with cuDNN (every CUDA wheel) also registers _cudnn_rnn (AutocastRNN.cpp), which
    # the policy emulates through its CPU stand-in mkldnn_rnn_layer
    with_cudnn = {"_cudnn_rnn"} if torch._C._has_cudnn else set()
    assert cuda_ops == set(POLICY) - CPU_STAND_INS | with_cudnn


def test_cpu_autocast_is_restored_after_emulation():
    x = torch.randn(4, 4, dtype=torch.float16)
    with emulated_cuda_autocast(torch.float16):
        assert x.softmax(-1).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.float16):
        assert x.softmax(-1).dtype == torch.float16  # CPU's own policy is back


def test_user_cuda_autocast_region_is_honoured():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with emulated_cuda_autocast(torch.float16):
        with torch.autocast(device_type="cuda", enabled=False):
            assert (x @ w).dtype == torch.float32
        assert (x @ w).dtype == torch.float16


def test_banned_op_raises_like_cuda_without_a_callback():
    with emulated_cuda_autocast(torch.float16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(torch.rand(4), torch.rand(4))


def test_user_code_asking_about_cuda_autocast_sees_the_emulation():
    with emulated_cuda_autocast(torch.bfloat16):
        assert torch.is_autocast_enabled() and torch.is_autocast_enabled("cuda")
        assert torch.get_autocast_dtype("cuda") == torch.bfloat16
        with torch.autocast("cuda", enabled=False):
            assert not torch.is_autocast_enabled("cuda")
    assert not torch.is_autocast_enabled("cuda")
