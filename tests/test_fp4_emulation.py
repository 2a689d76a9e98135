"""The FP4 emulation (runtime/pytorch/fp4.py) against hand-computed vectors: the E2M1 grid and
its ties, NVFP4's E4M3 block scales (rounding, subnormal and flushed scales), the 16x16 weight
tiles, MXFP4's E8M0 scales (rounded up, and the spec's floor rule that clips), the RHT and its
sign vector, stochastic rounding's expectation, the GEMM's per-tensor alpha; and the three
GEMMs of an FP4 Linear. Rerun under every CPU kernel path torch offers (the last test)."""
import numpy as np
import pytest
import torch
from kernel_paths import other_kernel_paths, rerun_test

from precisionaudit.core.numerics import E2M1_VALUES, NVFP4_SCALE_FLUSH, NVFP4_SCALE_WINDOW
from precisionaudit.runtime.pytorch import fp4


def _row(*values, width=16):
    """One row: ``values`` first, zeros after."""
    return torch.tensor(list(values) + [0.0] * (width - len(values)))


# --------------------------------------------------------------------------- E2M1
def test_every_e2m1_value_is_exact_and_ties_round_to_even():
    grid = torch.tensor(E2M1_VALUES)
    assert torch.equal(fp4.round_e2m1(grid), grid) and torch.equal(fp4.round_e2m1(-grid), -grid)
    # the midpoints between neighbours go to the one with the even mantissa (TE cast_to_fp4x2)
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert fp4.round_e2m1(ties).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    above = torch.tensor([0.2500001, 1.2500001, 2.5000002, 5.0000005])
    assert fp4.round_e2m1(above).tolist() == [0.5, 1.5, 3.0, 6.0]
    # saturation at +-6 (satfinite), signs kept
    assert fp4.round_e2m1(torch.tensor([6.5, 1e30, -7.0, -2.5, -0.1])).tolist() == [6.0, 6.0, -6.0, -2.0, -0.0]


def test_e2m1_rounding_is_ml_dtypes_float4_on_a_dense_grid():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.linspace(-7.5, 7.5, 60001, dtype=np.float32)
    want = x.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert np.array_equal(fp4.round_e2m1(torch.from_numpy(x)).numpy(), want)


# --------------------------------------------------------------------------- NVFP4 scales
def test_nvfp4_block_scale_is_e4m3_of_block_amax_times_448_over_tensor_amax():
    """Tensor amax 3: global encode 2688/3 = 896. Row 0 (amax 3): decode 3 * 896/6 = 448, the
    largest E4M3; encode 2: 3 -> 6, 1 -> 2. Row 1 (amax 0.3): decode 44.8, which E4M3 (step
    4 in [32, 64)) rounds down to 44; encode 896/44 = 20.36: 0.3 -> 6.11, clipped to 6 (the
    scale rounded down: the block max comes back as 6 * 44 * 3/2688 = 0.2946); 0.1 -> 2.04 -> 2."""
    q = fp4.nvfp4_quantize(torch.stack([_row(3.0, 1.0), _row(0.3, 0.1)]))
    assert q.amax.item() == 3.0
    assert q.values[:, :3].tolist() == [[6.0, 2.0, 0.0], [6.0, 2.0, 0.0]]
    assert q.scales[:, 0].tolist() == [448.0, 44.0] and torch.equal(q.scales[1], torch.full((16,), 44.0))
    back = q.dequantize()
    assert back[0, :2].tolist() == pytest.approx([3.0, 1.0], rel=1e-6)
    assert back[1, :2].tolist() == pytest.approx([6 * 44 * 3 / 2688, 2 * 44 * 3 / 2688], rel=1e-6)


def test_nvfp4_scales_go_subnormal_past_28672_and_flush_past_458752():
    """Tensor amax 1 (global encode 2688, decode 448 * block amax). A block 40000x smaller:
    decode 0.0112, an E4M3 subnormal (multiples of 2^-9): 6 * 2^-9 = 0.01171875 (fewer bits).
    A block 10^6 smaller: decode 4.48e-4, below half the smallest subnormal: 0, the block is lost."""
    assert (NVFP4_SCALE_WINDOW, NVFP4_SCALE_FLUSH) == (28672.0, 458752.0)
    q = fp4.nvfp4_quantize(torch.stack([_row(1.0), _row(1 / 40000), _row(1e-6)]))
    assert q.scales[:, 0].tolist() == [448.0, 6 * 2.0 ** -9, 0.0]
    assert q.values[1, 0].item() == 6.0  # 2.5e-5 * 2688 / 0.01171875 = 5.73 -> 6
    back = q.dequantize()
    assert back[1, 0].item() == pytest.approx(6 * 0.01171875 / 2688, rel=1e-6)
    assert torch.all(back[2] == 0)


def test_weights_share_16x16_tiles_where_inputs_have_1x16_blocks():
    """Row 0 holds 6.0, row 1 0.2 in the same 16x16 tile: the tile's decode is 448 and its
    encode 1, so 0.2 rounds to 0. The tile beside it (all 0.2) gets decode 0.2 * 448/6 =
    14.93 -> 15. In 1x16 blocks row 1 has its own block (decode 15): 0.2 survives."""
    w = torch.zeros(16, 32)
    w[0, 0], w[1, 0], w[1, 16:] = 6.0, 0.2, 0.2
    tiles = fp4.quantize(w, "nvfp4", "weight")
    assert (tiles.scales[1, 0].item(), tiles.values[1, 0].item()) == (448.0, 0.0)
    assert tiles.scales[15, 0].item() == 448.0  # one scale for the 16 rows of the tile
    assert tiles.scales[1, 16].item() == 15.0 and tiles.values[1, 16].item() == 6.0
    rows = fp4.quantize(w, "nvfp4", "input")
    assert (rows.scales[1, 0].item(), rows.values[1, 0].item()) == (15.0, 6.0)
    assert rows.scales[2, 0].item() == 0.0  # an all-zero block


def test_nvfp4_pads_to_whole_tiles_and_crops_back():
    w = torch.randn(20, 24, generator=torch.Generator().manual_seed(0))
    q = fp4.quantize(w, "nvfp4", "weight")
    assert q.values.shape == q.scales.shape == (20, 24)
    padded = torch.zeros(32, 32)
    padded[:20, :24] = w
    assert torch.equal(fp4.quantize(padded, "nvfp4", "weight").values[:20, :24], q.values)


# --------------------------------------------------------------------------- MXFP4 scales
def test_e8m0_scale_is_2_to_the_ceil_log2_of_amax_over_6():
    """amax 6: 2^0; 6.0001: 2^1 (6.0001/2 = 3.00005 -> 3); 3: 2^-1 (3 -> 6); 0.75: 2^-3; 7: 2^1,
    and 7/2 = 3.5 ties to 4: 7 comes back as 8; an all-zero block: 2^-127."""
    rows = [6.0, 6.0001, 3.0, 0.75, 7.0, 0.0]
    q = fp4.mxfp4_quantize(torch.stack([_row(a, width=32) for a in rows]))
    assert q.scales[:, 0].tolist() == [1.0, 2.0, 0.5, 0.125, 2.0, 2.0 ** -127]
    assert q.values[:, 0].tolist() == [6.0, 3.0, 6.0, 6.0, 4.0, 0.0]
    assert q.dequantize()[4, 0].item() == 8.0
    assert torch.equal(q.scales[0], torch.ones(32))  # one scale per 32 values


def test_the_spec_floor_rule_clips_blocks_whose_amax_mantissa_exceeds_1_5():
    """OCP MX 6.3: scale 2^(floor(log2 amax) - 2): 7 -> 2^0, 7 > 6 clips; 6 and 5 -> 2^0, no
    clip; 3.5 -> 2^-1, 7 > 6 clips; 3 -> 2^-1, 6: no clip."""
    x = torch.stack([_row(a, width=32) for a in (7.0, 6.0, 5.0, 3.5, 3.0, 0.0)])
    assert fp4.mx_floor_clips(x)[:, 0].tolist() == [True, False, False, True, False, False]


# --------------------------------------------------------------------------- the RHT
def test_the_hadamard_matrix_is_tes_signed_sylvester_matrix():
    h = fp4.hadamard_matrix()
    signs = torch.tensor([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=torch.float64)
    sylvester = torch.tensor([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)],
                             dtype=torch.float64)
    assert torch.equal(h, signs[:, None] * sylvester / 4)
    assert torch.equal(h @ h.t(), torch.eye(16, dtype=torch.float64))


def test_rht_of_a_unit_vector_is_its_signed_hadamard_row():
    """e_3: sign -1, Sylvester row 3 = (+1, -1, -1, +1) repeated, over 4."""
    e3 = torch.zeros(1, 32)
    e3[0, 3] = 1.0
    out = fp4.rht(e3)
    assert out[0, :16].tolist() == [-0.25, 0.25, 0.25, -0.25] * 4
    assert torch.all(out[0, 16:] == 0)  # blocks of 16 are transformed apart


def test_two_rhts_cancel_in_the_wgrad_product_and_keep_bf16():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(4, 64, generator=g, dtype=torch.float64), torch.randn(4, 64, generator=g, dtype=torch.float64)
    ha, hb = (fp4.hadamard_matrix() for _ in range(2))
    got = (a.reshape(-1, 16) @ ha * (b.reshape(-1, 16) @ hb)).sum()
    assert got.item() == pytest.approx((a * b).sum().item(), rel=1e-12)
    x = torch.randn(3, 32, generator=g).to(torch.bfloat16)
    assert fp4.rht(x).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="divisible by 16"):
        fp4.rht(torch.ones(2, 24))


# --------------------------------------------------------------------------- stochastic rounding
def test_stochastic_rounding_goes_up_with_the_distance_over_the_gap():
    """2.6 lies 0.6 of the way from 2 to 3: it becomes 3 exactly when the draw is below 0.6."""
    n = 4096
    x = torch.full((n,), 2.6)
    got = fp4.round_e2m1(x, torch.Generator().manual_seed(7))
    draws = torch.rand(n, generator=torch.Generator().manual_seed(7))
    assert torch.equal(got, torch.where(draws < (x - 2.0), 3.0, 2.0))


@pytest.mark.parametrize("value", [2.6, -2.6, 0.1, 4.5, 5.9])
def test_stochastic_rounding_is_unbiased(value):
    n = 200_000
    got = fp4.round_e2m1(torch.full((n,), value), torch.Generator().manual_seed(1))
    low = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    gap = float(low[low > abs(value)][0] - low[low <= abs(value)][-1])
    sigma = gap * 0.5 / n ** 0.5  # the largest spread of a two-point draw
    assert abs(got.mean().item() - value) < 5 * sigma
    assert set(got.abs().unique().tolist()) <= set(E2M1_VALUES)


def test_stochastic_rounding_keeps_grid_values_and_saturates():
    g = torch.Generator().manual_seed(2)
    grid = torch.tensor(E2M1_VALUES * 100)
    assert torch.equal(fp4.round_e2m1(grid, g), grid)
    assert torch.all(fp4.round_e2m1(torch.full((100,), 7.0), g) == 6.0)


def test_stochastic_nvfp4_averages_closer_than_round_to_nearest():
    """TE's test_nvfp4_sr_quantize: the mean of 50 stochastic quantizations is nearer the
    input than one round-to-nearest quantization."""
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(4))
    rn = fp4.nvfp4_quantize(x).dequantize()
    g = torch.Generator().manual_seed(5)
    mean = sum(fp4.nvfp4_quantize(x, generator=g).dequantize() for _ in range(50)) / 50
    assert (mean - x).square().mean() < (rn - x).square().mean()


# --------------------------------------------------------------------------- GEMMs
def test_the_gemm_scales_the_accumulator_by_both_tensor_amaxes():
    """x = (3, 1): values (6, 2), scale 448, amax 3; w = (2): encode 1344, decode 448,
    value 6, amax 2. 6*448*6*448 * (3*2 / (6*6*448*448)) = 6 = 3*2 exactly."""
    xq = fp4.quantize(_row(3.0, 1.0)[None], "nvfp4")
    wq = fp4.quantize(_row(2.0)[None], "nvfp4")
    assert wq.values[0, 0].item() == 6.0 and wq.scales[0, 0].item() == 448.0
    assert fp4.gemm(xq, wq).item() == 6.0


def test_the_gemm_is_tes_blockwise_qgemm_to_fp32_rounding():
    """TE's qgemm sums outer(sx, sw) * (block products) over the K blocks, then alpha."""
    g = torch.Generator().manual_seed(6)
    for fmt, block in (("nvfp4", 16), ("mxfp4", 32)):
        xq = fp4.quantize(torch.randn(8, 64, generator=g), fmt)
        wq = fp4.quantize(torch.randn(16, 64, generator=g), fmt, "weight")
        y = torch.zeros(8, 16, dtype=torch.float64)
        for k in range(0, 64, block):
            blocks = xq.values[:, k:k + block].double() @ wq.values[:, k:k + block].double().t()
            y += torch.outer(xq.scales[:, k].double(), wq.scales[:, k].double()) * blocks
        if fmt == "nvfp4":
            y *= xq.amax.double() * wq.amax.double() / (36 * 448 * 448)
        assert torch.allclose(fp4.gemm(xq, wq).double(), y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
def test_an_fp4_linear_runs_the_three_gemms_of_the_recipe(fmt):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 24, 64, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(32, 64, generator=g).requires_grad_()
    b = torch.randn(32, generator=g)
    out = fp4.linear(x, w, b, fmt=fmt, generator=torch.Generator().manual_seed(9))
    rows = x.detach().reshape(-1, 64)
    want = (fp4.gemm(fp4.quantize(rows, fmt), fp4.quantize(w.detach(), fmt, "weight")).to(torch.bfloat16)
            + b.to(torch.bfloat16)).reshape(2, 24, 32)
    assert out.dtype == torch.bfloat16 and torch.equal(out, want)
    dy = torch.randn(2, 24, 32, generator=g).to(torch.bfloat16)
    out.backward(dy)
    sr = torch.Generator().manual_seed(9)
    dx = fp4.dgrad(dy.reshape(-1, 32), w.detach(), fmt, sr).to(torch.bfloat16)
    dw = fp4.wgrad(rows, dy.reshape(-1, 32), fmt, sr)
    assert torch.equal(x.grad.reshape(-1, 64), dx) and torch.equal(w.grad, dw)
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32


def test_the_rht_spreads_an_outlier_token_in_the_wgrad():
    """One token 1000x the others: along the tokens (the Wgrad GEMM's reduced dim) its value
    sets every 16-token block's scale, the others flush; the RHT spreads it over its block."""
    g = torch.Generator().manual_seed(10)
    x, dy = torch.randn(64, 32, generator=g), torch.randn(64, 16, generator=g)
    dy[5] *= 1000
    exact = dy.t() @ x

    def sqnr(got):
        return 10 * torch.log10(exact.square().sum() / (got - exact).square().sum()).item()
    with_rht = fp4.wgrad(x.to(torch.bfloat16), dy.to(torch.bfloat16), "nvfp4")
    plain = fp4.gemm(fp4.quantize(dy.t().contiguous(), "nvfp4", "grad"), fp4.quantize(x.t().contiguous(), "nvfp4"))
    assert sqnr(with_rht) > sqnr(plain)


def test_a_token_count_off_16_is_padded_for_the_rht():
    g = torch.Generator().manual_seed(11)
    x, dy = torch.randn(20, 32, generator=g), torch.randn(20, 16, generator=g)
    padded = fp4.wgrad(torch.cat([x, torch.zeros(12, 32)]), torch.cat([dy, torch.zeros(12, 16)]), "nvfp4")
    assert torch.equal(fp4.wgrad(x, dy, "nvfp4"), padded)


# --------------------------------------------------------------------------- every kernel path
@pytest.mark.parametrize("path", other_kernel_paths())
def test_the_fp4_vectors_hold_under_every_kernel_path_torch_offers(path):
    rerun_test(__file__, path)
