"""The CPU emulation of CUDA's low-precision kernels (check --device cpu-emulated)."""
import json
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from kernel_paths import other_kernel_paths, rerun_test

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
def test_ranges_are_computed_in_fp32_and_rounded_once(dtype):
    """CUDA's arange and linspace compute each value in acc_type (fp32) and round it; CPU's
    fp16/bf16 ones differ on a quarter of these values."""
    with EmulatedKernels():
        got = torch.arange(0, 8000, 0.37, dtype=dtype), torch.linspace(-3, 7000, 10001, dtype=dtype)
    assert torch.equal(got[0], torch.arange(0, 8000, 0.37).to(dtype))
    assert torch.equal(got[1], torch.linspace(-3, 7000, 10001).to(dtype))


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
    """The model of bench/gpu_truth.py's table 2."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
    from gpu_truth import CROSS_ENTROPY_MODEL

    path = tmp_path / "cross_entropy_grad.py"
    path.write_text(CROSS_ENTROPY_MODEL)
    result = cli("check", path, "--grad", "--dtype", "float16", "--mode", "autocast", "--format", "json")
    baseline = json.loads(result.stdout)["variants"][1]
    assert result.exit_code == 0 and baseline["status"] == "ok", baseline.get("error")
    assert baseline["outputs"][0]["max_abs"] < 1e-3 and baseline["gradients"]["nonfinite"] == 0


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


# --- where CUDA keeps a running value in the low dtype (low_accumulation.py)

def low_add(a, b, dtype):
    """CUDA's ``a + b`` on two fp16/bf16 values (c10::Half operator+): fp32 sum, rounded."""
    return (a.float() + b.float()).to(dtype)


@pytest.mark.parametrize("dtype", LOW)
def test_a_scan_along_an_outer_dimension_rounds_every_step(dtype):
    """tensor_kernel_scan_outer_dim: one thread per column, acc = acc + x, acc a scalar_t."""
    torch.manual_seed(0)
    x = (torch.rand(2, 700, 3) + 0.2).to(dtype)
    with EmulatedKernels():
        got = x.cumsum(1)
    want = torch.empty_like(x)
    for i in range(2):
        for j in range(3):
            acc = x[i, 0, j]
            want[i, 0, j] = acc
            for k in range(1, 700):
                acc = want[i, k, j] = low_add(acc, x[i, k, j], dtype)
    assert torch.equal(got, want)
    assert not torch.equal(got, x.float().cumsum(1).to(dtype)), "fp32 accumulation would not show it"


def cuda_innermost_scan(x: np.ndarray) -> np.ndarray:
    """tensor_kernel_scan_innermost_dim_impl (ScanUtils.cuh) for fp16, thread by thread."""
    num_rows, row_size = x.shape
    log_x = log_num_threads_x(num_rows, row_size)
    nx = 1 << log_x
    out = np.empty_like(x)

    def add(a, b):
        return np.float16(np.float32(a) + np.float32(b))

    for row in range(num_rows):
        block_total = np.float16(0)
        for block_col in range(0, row_size, 2 * nx):
            buf = [x[row, c] if c < row_size else np.float16(0) for c in range(block_col, block_col + 2 * nx)]
            buf[0] = add(buf[0], block_total)
            for m in range(log_x + 1):
                s = 1 << m
                for tx in range(nx):
                    a = ((tx >> m) << (m + 1)) | s
                    ti, si = a + tx % s, a - 1
                    buf[ti] = add(buf[ti], buf[si])
            end = min(block_col + 2 * nx, row_size)
            out[row, block_col:end] = buf[:end - block_col]
            block_total = buf[2 * nx - 1]
    return out


def log_num_threads_x(num_rows, row_size):
    """get_log_num_threads_x_inner_scan<uint32_t>, in uint32 arithmetic as compiled."""
    log_x = log_y = 0
    while (1 << log_x) < row_size:
        log_x += 1
    while (1 << log_y) < num_rows:
        log_y += 1
    with np.errstate(over="ignore"):
        wrapped = (np.uint32(9) + (np.uint32(log_x) - np.uint32(log_y))) // np.uint32(2)
    return int(min(max(4, wrapped), 9))


@pytest.mark.parametrize("rows,row_size", [(64, 300), (3, 1000), (2048, 3)])
def test_a_scan_along_the_innermost_dimension_is_cudas_tiled_tree(rows, row_size):
    from precisionaudit.runtime.pytorch.low_accumulation import log_threads_x

    torch.manual_seed(0)
    x = (torch.rand(rows, row_size) + 0.5).half()
    with EmulatedKernels():
        got = x.cumsum(-1)
    assert log_threads_x(rows, row_size) == log_num_threads_x(rows, row_size)
    assert torch.equal(got, torch.from_numpy(cuda_innermost_scan(x.numpy())))


def test_a_one_dimensional_fp16_cumsum_errs_as_cudas_device_scan_does():
    """pytorch/pytorch#180150 (torch 2.9): an fp16 cumsum of 500,000 randn values on a GPU is
    off by 5.59 from the float64 one, 11x CPU's fp32-accumulating 0.505 (11-15x on the GPUs
    reported). A sequential fp16 scan is off by far more, an fp32 one by far less."""
    torch.manual_seed(0)
    x = torch.randn(500_000, dtype=torch.float16)
    exact = x.double().cumsum(0)
    with EmulatedKernels():
        got = x.cumsum(0)
    cpu_error = (x.cumsum(0).double() - exact).abs().max().item()
    error = (got.double() - exact).abs().max().item()
    assert 2 < error < 15 and 8 < error / cpu_error < 25, (error, cpu_error)


def test_bf16_cumprod_and_logcumsumexp_scan_in_the_low_dtype_too():
    torch.manual_seed(0)
    x = (torch.rand(400, 2) * 0.02 + 0.995).bfloat16()
    y = torch.randn(400, 2).bfloat16()
    with EmulatedKernels():
        prod, lse = x.cumprod(0), y.logcumsumexp(0)
    want_prod, want_lse = x.clone(), y.clone()
    for k in range(1, 400):
        want_prod[k] = (want_prod[k - 1].float() * x[k].float()).bfloat16()
        want_lse[k] = torch.logaddexp(want_lse[k - 1].float(), y[k].float()).bfloat16()
    assert torch.equal(prod, want_prod) and torch.equal(lse, want_lse)


def test_pa103_cumsum_hazard_fails_its_check_as_on_the_h200(cli):
    """bench/README.md, 'Results: one NVIDIA H200': CUDA max_abs 8.88, the emulation (fp32
    accumulation) 0.254 and passed."""
    from conftest import sample

    result = cli("check", sample("pa103_cumsum_hazard.py"), "--mode", "pure", "--format", "json")
    baseline = json.loads(result.stdout)["variants"][1]
    assert result.exit_code == 1 and baseline["status"] == "exceeds_tolerance"
    assert abs(baseline["outputs"][0]["max_abs"] - 8.88) < 0.45


@pytest.mark.parametrize("dtype", LOW)
def test_index_add_and_scatter_add_round_every_add_as_cudas_atomics(dtype):
    torch.manual_seed(0)
    dest = torch.zeros(5, 8, dtype=dtype)
    index = torch.randint(0, 5, (300,))
    src = (torch.rand(300, 8) + 0.5).to(dtype)
    with EmulatedKernels():
        added = dest.index_add(0, index, src)
        scattered = dest.scatter_add(0, index.unsqueeze(1).expand(300, 8), src)
    want = dest.clone()
    for i, row in enumerate(index.tolist()):
        want[row] = low_add(want[row], src[i], dtype)
    assert torch.equal(added, want) and torch.equal(scattered, want)
    assert not torch.equal(want, dest.float().index_add(0, index, src.float()).to(dtype))


def test_put_accumulating_rounds_every_add_as_cudas_atomics():
    dest = torch.zeros(4, dtype=torch.float16)
    with EmulatedKernels():
        dest.put_(torch.tensor([0, 0, 0, -1]), torch.tensor([2048.0, 1.0, 1.0, 3.0]).half(), accumulate=True)
    assert dest.tolist() == [2048.0, 0.0, 0.0, 3.0]  # 2048 + 1 is 2048 in fp16, twice


def nll_loss2d_as_cuda(logp, target, weight=None, ignore_index=-100, mean=True):
    """NLLLoss2d.cu written out one block at a time (1024 threads, blocks_per_sample =
    max(1, ceil(H*W / 1024) // 128), block k taking the pixels whose 1024-wide chunk index is
    k mod that): fp32 block sums, each cast to the low dtype and atomically added into the
    low-precision output and weight total; the mean their low-precision quotient."""
    low = logp.dtype
    n, _, h, w = logp.shape
    pixels = h * w
    blocks = max(1, -(-pixels // 1024) // 128)
    out = total = torch.zeros((), dtype=low)
    for b in range(n):
        for k in range(blocks):
            loss_sum = weight_sum = 0.0
            for i in range(pixels):
                if (i // 1024) % blocks != k:
                    continue
                t = int(target[b].reshape(-1)[i])
                if t == ignore_index:
                    continue
                cur = 1.0 if weight is None else float(weight[t])
                value = float(logp[b, t].reshape(-1)[i])
                product = value * cur if weight is None else float(torch.tensor(value * cur).to(low))
                loss_sum -= product
                weight_sum += cur
            out = low_add(out, torch.tensor(loss_sum).to(low), low)
            total = low_add(total, torch.tensor(weight_sum).to(low), low)
    return ((out.float() / total.float()).to(low) if mean else out), total


@pytest.mark.parametrize("dtype", LOW)
def test_nll_loss2d_adds_fp32_block_sums_atomically_in_the_low_dtype(dtype):
    """Issue 41: with class weights and ignored pixels, over 2 samples of 1,500 pixels (one
    block each): output and total_weight as the kernel's atomics make them."""
    torch.manual_seed(0)
    logp = F.log_softmax(torch.randn(2, 5, 30, 50) * 3, dim=1).to(dtype)
    target = torch.randint(0, 5, (2, 30, 50))
    target[0, :4] = -100
    weight = torch.tensor([0.5, 1.25, 2.0, 0.7, 3.1]).to(dtype)
    with EmulatedKernels():
        got = torch.ops.aten.nll_loss2d_forward(logp, target, weight, 1, -100)
        summed = torch.ops.aten.nll_loss2d_forward(logp, target, None, 2, -100)
    want = nll_loss2d_as_cuda(logp, target, weight)
    want_sum = nll_loss2d_as_cuda(logp, target, mean=False)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(summed[0], want_sum[0]) and torch.equal(summed[1], want_sum[1])


def test_nll_loss2d_past_65504_pixels_is_nan_in_fp16_as_on_cuda():
    """pytorch/pytorch#29429: NLLLoss(reduction='mean') on fp16 (N, C, 256, 256) is NaN on the
    GPU: the fp16 weight total and loss sum both pass 65504 (inf / inf). Over 2 x 181 x 181
    pixels (one block each, 32,761 pixels) it is the atomic add across blocks that overflows;
    512 x 512 pixels take 2 blocks a sample. Below 65,504 pixels it is finite; in bf16 too."""
    torch.manual_seed(0)
    for shape, nan in [((1, 3, 256, 256), True), ((2, 3, 181, 181), True), ((1, 2, 512, 512), True),
                       ((2, 3, 100, 100), False)]:
        logp = F.log_softmax(torch.randn(shape), dim=1)
        target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
        with EmulatedKernels():
            loss = F.nll_loss(logp.half(), target)
            loss_bf16 = F.nll_loss(logp.bfloat16(), target)
        assert bool(loss.isnan()) == nan, shape
        assert torch.isfinite(loss_bf16) and abs(loss_bf16.float() - F.nll_loss(logp, target)) < 0.02


def test_nll_loss2d_backward_divides_by_the_fp16_weight_total():
    """The mean's backward reads total_weight as stored (fp16 inf past 65504 pixels): every
    gradient is -grad_output / inf = -0, as on CUDA: training learns nothing, silently."""
    logp = F.log_softmax(torch.randn(1, 2, 256, 256), dim=1).half().requires_grad_()
    target = torch.randint(0, 2, (1, 256, 256))
    with EmulatedKernels():
        F.nll_loss(logp, target).backward()
        _, total = torch.ops.aten.nll_loss2d_forward(logp.detach(), target, None, 1, -100)
    assert torch.isinf(total) and logp.grad.abs().max() == 0
    half = F.log_softmax(torch.randn(1, 2, 128, 128), dim=1).half().requires_grad_()
    with EmulatedKernels():
        F.nll_loss(half, torch.randint(0, 2, (1, 128, 128))).backward()
    assert half.grad.abs().max() > 0  # 16,384 pixels: the gradient is there


# --- the same equalities under each of CPU's kernel paths


@pytest.mark.parametrize("path", other_kernel_paths())
def test_the_equalities_hold_under_every_kernel_path_torch_offers(path):
    """torch picks its vectorised kernels (and its fp32 math functions) by instruction set at
    start-up: this machine also covers the machines that have only another path."""
    rerun_test(__file__, path)
