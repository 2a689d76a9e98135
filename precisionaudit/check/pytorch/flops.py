"""GEMM FLOPs of a forward, split by the dtype they run in.

A plan is judged by the error it removes and by the share of GEMM FLOPs it keeps on the
fast low-precision path; this counts them on the ops that actually ran (below autocast,
so with the dtypes autocast chose). Formulas are PyTorch's own (``flop_registry``: mm,
addmm, bmm, baddbmm, convolutions, fused attention); recurrent layers (oneDNN's
``mkldnn_rnn_layer``, cuDNN's ``_cudnn_rnn``), which it lacks, count ``2 * steps * batch``
per weight-matrix element.
"""
from __future__ import annotations

from collections import Counter

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from ...core.numerics import LOW_PRECISION_NAMES, dtype_name
from ...runtime.pytorch import gemm_format
from ...runtime.pytorch.fp4 import FORMAT_NAME as FP4_NAME
from ...runtime.pytorch.fp8 import FORMAT_NAME as FP8_NAME

#: the quantized GEMMs (computed in fp32 by runtime/pytorch/fp8.py and fp4.py), by the name
#: they are counted under
QUANTIZED = (FP8_NAME, FP4_NAME)

RNN_OPS = {"mkldnn_rnn_layer", "_cudnn_rnn"}


def _rnn_flops(name, args) -> int:
    """mkldnn_rnn_layer(input, w_ih, w_hh, ...) / _cudnn_rnn(input, [weights], ...)."""
    x = args[0]
    weights = [args[1], args[2]] if name == "mkldnn_rnn_layer" else list(args[1])
    vectors = x.numel() // max(x.shape[-1], 1)  # steps * batch
    return 2 * vectors * sum(w.numel() for w in weights if w.dim() == 2)


class GemmFlops(TorchDispatchMode):
    """``by_dtype``: GEMM FLOPs per compute dtype name while the mode is active."""

    def __init__(self):
        super().__init__()
        self.by_dtype = Counter()
        self.uncounted = Counter()  # op → calls whose FLOP formula did not apply (counted 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        flops = 0
        if packet in flop_registry:
            try:
                flops = flop_registry[packet](*args, **kwargs, out_val=out)
            except Exception:  # noqa: BLE001 - an op whose formula does not apply: the report says so
                self.uncounted[packet.__name__] += 1
        elif packet.__name__ in RNN_OPS:
            flops = _rnn_flops(packet.__name__, args)
        if flops:
            first = next((a for a in pytree.tree_leaves(args)
                          if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
            if first is not None:
                name = gemm_format.current() or str(first.dtype).replace("torch.", "")
                self.by_dtype[name] += int(flops)
        return out

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    def low_share(self) -> float | None:
        """Share of GEMM FLOPs in fp16/bf16, FP8 or FP4 (None when the forward ran no GEMM)."""
        if not self.total:
            return None
        low = sum(v for k, v in self.by_dtype.items() if k in LOW_PRECISION_NAMES or k in QUANTIZED)
        return low / self.total

    def share_of(self, name: str) -> float | None:
        """Share of GEMM FLOPs run as ``name``'s GEMMs (``float8_e4m3fn``, ``float4_e2m1fn``;
        None when the forward ran no GEMM)."""
        return self.by_dtype[name] / self.total if self.total else None


class LinearCensus:
    """Which ``nn.Linear`` modules ran their GEMM in a low precision while the block runs: a
    Linear's output has the dtype its GEMM computed in (fp16/bf16; an FP8 GEMM's is bf16), so a
    plan that keeps one in float32 shows as a float32 output. ``low``/``total``: the counts."""

    def __init__(self, model):
        self.linears = {m: name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        self.dtypes: dict = {}
        self.handles = []

    def __enter__(self):
        self.handles = [m.register_forward_hook(self._seen) for m in self.linears]
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _seen(self, module, args, output):
        if isinstance(output, torch.Tensor) and output.is_floating_point():
            self.dtypes.setdefault(self.linears[module], dtype_name(output.dtype))

    @property
    def total(self) -> int:
        return len(self.dtypes)

    @property
    def low(self) -> int:
        return sum(1 for d in self.dtypes.values() if d in LOW_PRECISION_NAMES)
