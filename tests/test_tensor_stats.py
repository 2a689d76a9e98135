"""The range pass's torch statistics equal core.values.value_stats (numpy, the definition) key for
key: on tensors with fills (inf, NaN, +-finfo.max), zeros, subnormals and values that flush,
in every dtype the range pass measures, and on tensors large enough to be sampled."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from precisionaudit.capture.pytorch.tensor_stats import EXTREMES, WEIGHT_KEYS, tensor_extremes, tensor_stats, weight_stats
from precisionaudit.core.values import SAMPLE, merge, value_stats

F16_MAX, F32_MAX = 65504.0, float(torch.finfo(torch.float32).max)
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, F16_MAX, -F16_MAX, F32_MAX, -F32_MAX,
           2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14, 2.0**-15, 1e-30, 2.0**-133, 2.0**-135, 1e5, -7e4]


def _same(got: dict, want: dict):
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key] == value or (value != value and got[key] != got[key]), (key, got[key], value)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.sampled_from(SPECIAL), st.floats(width=32, allow_nan=False, allow_infinity=False),
                                 st.floats(-2.0**-10, 2.0**-10, width=32)), max_size=300),
       dtype=st.sampled_from(["float16", "bfloat16"]))
def test_equal_to_value_stats_on_any_values(values, dtype):
    x = torch.tensor(values, dtype=torch.float32)
    want = value_stats(x.numpy(), dtype)
    _same(tensor_stats(x, dtype), want)
    _same(tensor_extremes(x, dtype), {key: want[key] for key in EXTREMES})
    _same(weight_stats(x, dtype), {key: want[key] for key in WEIGHT_KEYS})
    low = x.to(getattr(torch, dtype))  # the run under the target's results: its own dtype
    _same(tensor_extremes(low, dtype), {key: value_stats(low.float().numpy(), dtype)[key] for key in EXTREMES})


@pytest.mark.parametrize("storage", [torch.float16, torch.bfloat16, torch.float64])
def test_a_low_precision_tensor_is_judged_on_its_fp32_widening(storage):
    x = (torch.randn(4, 33, generator=torch.Generator().manual_seed(0)) * 3000).to(storage)
    x[0, 0], x[1, 1] = 0, float("inf") if storage != torch.float64 else 1e300
    want = value_stats(x.float().numpy(), "float16")
    _same(tensor_stats(x, "float16"), want)
    _same(weight_stats(x, "float16"), {key: want[key] for key in WEIGHT_KEYS})


@pytest.mark.parametrize("size", [SAMPLE - 1, 3 * SAMPLE + 17])
@pytest.mark.parametrize("kind", ["gaussian", "heavy tail", "ties", "relu"])
def test_the_sampled_percentile_is_value_stats_s(size, kind):
    """Beyond SAMPLE values the percentile is taken from every step-th value; the bound it is
    searched above must never hide the value: heavy tails, ties and half zeros."""
    generator = torch.Generator().manual_seed(size)
    x = torch.randn(size, generator=generator)
    if kind == "heavy tail":
        x = x.pow(9)
    elif kind == "ties":
        x = x.round()
    elif kind == "relu":
        x = x.clamp(min=0)
    want = value_stats(x.numpy(), "float16")
    _same(tensor_stats(x, "float16"), want)
    _same(weight_stats(x, "float16"), {key: want[key] for key in WEIGHT_KEYS})  # over chunks


def test_a_bound_above_the_percentile_falls_back_to_every_value():
    """Outliers on exactly the positions of the sparse sample the bound is read from: the
    bound is one of them, too few values reach it, and the percentile comes from all values."""
    x = torch.rand(SAMPLE, generator=torch.Generator().manual_seed(0))
    x[::64][:100] = 1000.0  # 100 values, where 1 in 1000 of 2**20 is 1049
    _same(tensor_stats(x, "float16"), value_stats(x.numpy(), "float16"))
    assert tensor_stats(x, "float16")["p999"] == float(np.sort(x.numpy())[math.ceil(0.999 * SAMPLE) - 1])


def test_no_values():
    _same(tensor_stats(torch.zeros(0), "float16"), value_stats(np.zeros(0, np.float32), "float16"))
    _same(tensor_stats(torch.full((5,), math.nan), "float16"), value_stats(np.full(5, np.nan, np.float32), "float16"))


def test_extremes_merge_over_batches_as_the_full_statistics_do():
    """The run under the target keeps the extremes only; merged over batches they are the
    full statistics' extremes, with the batch of the largest |x| and of the first inf."""
    batches = [torch.tensor([1.0, -3.0]), torch.tensor([7.0, float("inf")]), torch.tensor([-9.0, 2.0])]
    full = extremes = None
    for batch, x in enumerate(batches):
        full = merge(full, value_stats(x.numpy(), "float16"), batch)
        extremes = merge(extremes, tensor_extremes(x, "float16"), batch)
    assert extremes == {key: full[key] for key in (*EXTREMES, "batch", "nonfinite_batch")}
    assert (extremes["max_abs"], extremes["batch"], extremes["nonfinite_batch"]) == (9.0, 2, 1)
    assert (extremes["lo"], extremes["hi"], extremes["nonfinite"]) == (-9.0, math.inf, 1 / 6)
