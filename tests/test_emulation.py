"""The CPU emulation of CUDA's low-precision kernels (check --device cpu-emulated)."""
import json

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


#: ops CPU computes natively in fp16/bf16 and CUDA in fp32 (opmath, acc_type): the emulation
#: never runs CPU's low-precision kernel. On AVX-512, CPU's own fp16 gelu differs from
#: fp32-then-round on 6% of these elements; pow, log_softmax and layer_norm on every path;
#: rsqrt and erf on one path each.
COMPUTED_IN_FP32 = {
    "sum": lambda t: t.sum(-1), "mean": lambda t: t.mean(-1), "var": lambda t: t.var(-1),
    "softmax": lambda t: t.softmax(-1), "log_softmax": lambda t: t.log_softmax(-1),
    "norm": lambda t: t.norm(dim=-1), "layer_norm": lambda t: F.layer_norm(t, t.shape[-1:]),
    "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu, "erf": torch.erf,
    "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "sin": torch.sin,
    "softplus": F.softplus, "pow": lambda t: t.abs().pow(1.7), "log": lambda t: t.abs().log(),
    "mul_scalar": lambda t: t * 300.7, "div": lambda t: t / 3.3, "rsqrt": lambda t: t.abs().rsqrt(),
    "lt_scalar": lambda t: t < 0.1, "addcmul": lambda t: torch.addcmul(t, t, t, value=0.3),
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("op", sorted(COMPUTED_IN_FP32))
def test_ops_compute_in_fp32_and_round_once(op, dtype):
    torch.manual_seed(0)
    x = (torch.randn(8, 4096) * 3).to(dtype)
    fn = COMPUTED_IN_FP32[op]
    with EmulatedKernels():
        got = fn(x)
    want = fn(x.float())
    assert torch.equal(got, want.to(dtype) if want.is_floating_point() else want)


@pytest.mark.parametrize("dtype", LOW)
def test_ops_writing_into_low_tensors_round_the_fp32_result_once(dtype):
    torch.manual_seed(0)
    a, b = (torch.randn(4096) * 3).to(dtype), (torch.randn(4096) * 3).to(dtype)
    x, out, pair = a.clone(), torch.empty(0, dtype=dtype), [a.clone(), b.clone()]
    with EmulatedKernels():
        x.mul_(b).add_(0.37)
        torch.addcmul(a, a, b, value=0.3, out=out)
        torch._foreach_mul_(pair, 1.7)
    assert torch.equal(x, ((a.float() * b.float()).to(dtype).float() + 0.37).to(dtype))
    assert torch.equal(out, torch.addcmul(a.float(), a.float(), b.float(), value=0.3).to(dtype))
    assert all(torch.equal(p, (t.float() * 1.7).to(dtype)) for p, t in zip(pair, (a, b)))


def test_a_norms_statistics_stay_fp32_as_on_cuda():
    """CUDA's layer_norm returns its mean and rstd in fp32 for an fp16 input (acc_type), and
    its backward reads them so: the gradient of the emulated fp16 layer norm is the fp32
    gradient of the fp16 values, rounded once."""
    torch.manual_seed(0)
    x = (torch.randn(4, 256) * 3).half().requires_grad_()
    w, b = torch.randn(256).half().requires_grad_(), torch.randn(256).half().requires_grad_()
    with EmulatedKernels():
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [256], w, b, 1e-5)
        F.layer_norm(x, (256,), w, b).float().pow(2).sum().backward()
    assert mean.dtype == rstd.dtype == torch.float32
    wide = [t.detach().float().requires_grad_() for t in (x, w, b)]
    F.layer_norm(wide[0], (256,), wide[1], wide[2]).half().float().pow(2).sum().backward()
    for low, fp32 in zip((x, w, b), wide):
        assert torch.allclose(low.grad.float(), fp32.grad.half().float(), rtol=2e-3, atol=1e-3)


def test_cross_entropy_backward_under_fp16_autocast():
    """gpu_truth table 2: ``check --grad`` on cross_entropy of an fp16 GEMM's logits raised
    "expected scalar type Float but found Half" in log_softmax's backward (the H200 ran it:
    max_abs 1.3e-4, finite gradients)."""
    torch.manual_seed(0)
    lin, x, y = torch.nn.Linear(64, 10), torch.randn(8, 64), torch.randint(0, 10, (8,))
    with EmulatedKernels():
        with emulated_cuda_autocast(torch.float16):
            loss = F.cross_entropy(lin(x), y)
        loss.backward()
    logits = F.linear(x.half().float(), lin.weight.half().float(), lin.bias.half().float()).half()
    want = F.cross_entropy(logits.float(), y)  # log_softmax in fp16 (fp32 inside), nll in fp32
    assert loss.dtype == torch.float32 and abs(loss.item() - want.item()) < 2e-3
    assert lin.weight.grad.dtype == torch.float32 and torch.isfinite(lin.weight.grad).all()


def test_check_grad_runs_the_cross_entropy_model(tmp_path, cli):
    path = tmp_path / "cross_entropy_grad.py"
    path.write_text(CROSS_ENTROPY_MODEL)
    result = cli("check", path, "--grad", "--dtype", "float16", "--mode", "autocast", "--format", "json")
    baseline = json.loads(result.output)["variants"][1]
    assert result.exit_code == 0 and baseline["status"] == "ok", baseline.get("error")
    assert baseline["outputs"][0]["max_abs"] < 1e-3 and baseline["gradients"]["nonfinite"] == 0


CROSS_ENTROPY_MODEL = """import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 10)

    def forward(self, x, y):
        return F.cross_entropy(self.proj(x), y)


def get_model():
    return Classifier()


def get_example_inputs():
    return (torch.randn(8, 64), torch.randint(0, 10, (8,)))
"""


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
