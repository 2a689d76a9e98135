"""The CPU emulation of CUDA's low-precision kernels (check --device cpu-emulated)."""
import pytest
import torch
import torch.nn.functional as F

from precisionaudit.runtime.pytorch.cuda_autocast import emulated_cuda_autocast
from precisionaudit.runtime.pytorch.emulation import EmulatedKernels

LOW = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", LOW)
def test_gemm_accumulates_in_fp32_and_rounds_once(dtype):
    # 2048 + 1 + 1: an fp16 running sum rounds 2049 back to 2048 twice; fp32 holds 2050,
    # which fp16 stores exactly (bf16 rounds 2050 to 2048 either way: its check is the inf)
    a = torch.tensor([[2048.0, 1.0, 1.0]], dtype=dtype)
    b = torch.ones(3, 1, dtype=dtype)
    with EmulatedKernels():
        out = a @ b
    assert out.dtype == dtype
    assert out.item() == torch.tensor(2050.0).to(dtype).item()
    big = torch.full((1, 4), 300.0, dtype=dtype)
    with EmulatedKernels():
        product = big @ big.t()  # 360000: past fp16's 65504 only once rounded
    assert torch.isinf(product).all() if dtype == torch.float16 else product.item() == 360448.0


@pytest.mark.parametrize("dtype", LOW)
def test_linear_bmm_and_conv_match_fp32_arithmetic_rounded(dtype):
    torch.manual_seed(0)
    lin, conv = torch.nn.Linear(64, 48), torch.nn.Conv2d(8, 16, 3)
    x, img = torch.randn(2, 5, 64), torch.randn(2, 8, 10, 10)
    q = torch.randn(3, 7, 16)
    with EmulatedKernels():
        got = (lin.to(dtype)(x.to(dtype)), conv.to(dtype)(img.to(dtype)),
               torch.bmm(q.to(dtype), q.to(dtype).transpose(1, 2)))
    want = (lin.float()(x.to(dtype).float()).to(dtype), conv.float()(img.to(dtype).float()).to(dtype),
            torch.bmm(q.to(dtype).float(), q.to(dtype).float().transpose(1, 2)).to(dtype))
    for g, w in zip(got, want):
        assert g.dtype == dtype and torch.equal(g, w)


def test_autocast_gemms_of_the_emulated_policy_are_emulated():
    lin, x = torch.nn.Linear(32, 32), torch.randn(4, 32)
    with EmulatedKernels(), emulated_cuda_autocast(torch.float16):
        out = lin(x)
    want = F.linear(x.half().float(), lin.weight.half().float(), lin.bias.half().float()).half()
    assert out.dtype == torch.float16 and torch.equal(out, want)


def test_mixed_dtypes_raise_as_cuda_does():
    with EmulatedKernels(), pytest.raises(RuntimeError, match="dtype"):
        torch.randn(2, 3).half() @ torch.randn(3, 2)


def test_log_softmax_and_prod_accumulate_in_fp32():
    torch.manual_seed(0)
    x = (torch.randn(8, 4096) * 3).half()
    with EmulatedKernels():
        got = torch.log_softmax(x, -1), (x[:, :8] / 3).prod(-1)
    want = torch.log_softmax(x.float(), -1).half(), (x[:, :8] / 3).float().prod(-1).half()
    for g, w in zip(got, want):
        assert g.dtype == torch.float16 and torch.equal(g, w)
    with EmulatedKernels():
        wide = x.prod(-1, dtype=torch.float32)
    assert wide.dtype == torch.float32


def test_gradients_of_emulated_gemms_are_low_precision():
    lin = torch.nn.Linear(16, 8).half()
    x = torch.randn(4, 16, dtype=torch.float16, requires_grad=True)
    with EmulatedKernels():
        lin(x).float().sum().backward()
    assert x.grad.dtype == lin.weight.grad.dtype == torch.float16
    assert torch.equal(x.grad, (torch.ones(4, 8) @ lin.weight.float()).half())


#: ops the emulation leaves to CPU: its fp16/bf16 kernels compute in fp32 and round once,
#: as CUDA's do (the claim the module documents; exact equality on this input)
NATIVE_AS_CUDA = {
    "sum": lambda t: t.sum(-1), "mean": lambda t: t.mean(-1), "var": lambda t: t.var(-1),
    "softmax": lambda t: t.softmax(-1), "norm": lambda t: t.norm(dim=-1),
    "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
    "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "mul_scalar": lambda t: t * 300.7, "div": lambda t: t / 3.3, "rsqrt": lambda t: t.abs().rsqrt(),
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("op", sorted(NATIVE_AS_CUDA))
def test_cpu_kernels_left_alone_compute_in_fp32_and_round_once(op, dtype):
    torch.manual_seed(0)
    x = (torch.randn(8, 4096) * 3).to(dtype)
    fn = NATIVE_AS_CUDA[op]
    with EmulatedKernels():
        got = fn(x)
    assert torch.equal(got, fn(x.float()).to(dtype))


def test_mixed_operands_compute_what_fp32_computes_rounded_once_and_only_for_the_capture():
    """The scan's capture runs a half convolution given a float32 input in fp32 (rounded to
    half once); outside it the model raises, as CUDA does (check's verdict)."""
    from precisionaudit.runtime.pytorch.emulation import mixed_operands

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 4, 3).half()
    x, basis = torch.randn(1, 4, 8, 8), torch.randn(6, 6)
    with mixed_operands() as found:
        y = conv(x)
        z = y @ basis
    wide = torch.nn.functional.conv2d(x, conv.weight.float(), conv.bias.float())
    assert y.dtype == torch.float16 and torch.equal(y, wide.half())
    assert z.dtype == torch.float16 and torch.equal(z, (y.float() @ basis).half())
    assert found == {"conv2d": ("float16", "float32"), "mm": ("float16", "float32")}
    with pytest.raises(RuntimeError, match="should be the same"):
        conv(x)
    with pytest.raises(RuntimeError, match="same dtype"):
        y @ basis
