"""The torch side of the dtype vocabulary (core.numerics names the dtypes without torch)."""
from __future__ import annotations

import torch

#: the low-precision dtypes a target can name, as torch dtypes
LOW_PRECISION = (torch.float16, torch.bfloat16)
