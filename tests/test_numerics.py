"""core.numerics rounds without torch; what it says must be what torch stores."""
import numpy as np
import pytest
import torch

from precisionaudit.core.numerics import EXACT_INTEGER_LIMIT, SMALLEST_NORMAL, rounds_to

DTYPES = ["float16", "bfloat16", "float32"]
EDGES = [0.0, -0.0, 1e-9, 1e-8, 5.96e-8, 2.98e-8, 6.1e-5, 1e-40, 1e-45, -1e9, 1e9, 65504, 65519.99,
         65520, 3.39e38, 3.3961e38, 3.4e38, 2049, 2051, 257, 259, float("inf"), float("-inf"),
         1 + 2**-8, 1 + 3 * 2**-9, 1 + 2**-24 + 2**-52]


def torch_stores(value, dtype):
    return torch.tensor(value, dtype=torch.float64).to(getattr(torch, dtype)).item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_rounds_to_matches_torch_on_edges_and_random_bit_patterns(dtype):
    patterns = np.random.default_rng(0).integers(0, 2**32, 5000, dtype=np.uint64)
    values = EDGES + [float(v) for v in patterns.astype(np.uint32).view(np.float32) if v == v]
    mismatched = [v for v in values if np.float64(rounds_to(v, dtype)).tobytes()
                  != np.float64(torch_stores(v, dtype)).tobytes()]
    assert mismatched == []


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_stays_nan(dtype):
    assert rounds_to(float("nan"), dtype) != rounds_to(float("nan"), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_facts_are_torchs(dtype):
    assert SMALLEST_NORMAL[dtype] == torch.finfo(getattr(torch, dtype)).tiny
    limit = EXACT_INTEGER_LIMIT[dtype]
    assert rounds_to(limit, dtype) == limit and rounds_to(limit + 1, dtype) != limit + 1
