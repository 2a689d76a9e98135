"""What FP4 does to each ``nn.Linear`` on real values (--weights, --data under --dtype
nvfp4|mxfp4): sums and counts, never the values.

Every operand is quantized exactly as ``check --dtype nvfp4|mxfp4`` computes its GEMMs
(``runtime/pytorch/fp4.py``, where each recipe's quantizer is cited): the weight in the
recipe's weight blocks (NVFP4 16x16 tiles, MXFP4 1x32), the input, cast to bf16 as autocast
hands it to the layer, in 1x16 / 1x32 blocks along K. Per operand: how many blocks hold a
non-zero value, how many of those got an NVFP4 E4M3 scale below its normal range (tensor amax
over block amax past 28672) or one that rounds to 0 (past 458752: the block is lost), how many
the MX spec's floor rule would clip (MXFP4), how many keep fewer than half their non-zero
values ("hollow": the rest round to 0); the non-zero values that become 0; the signal and
noise sums of the round trip (its SQNR). Per input channel: its amax, sum of squares and
squared error (outlier channels and what they cost the other channels of their block).

With --data each batch also runs one forward and backward in fp32 (the model's loss where it
returns one, an LM's next-token loss on its own input_ids, else a fixed random projection of
the outputs): each FP4 GEMM's forward output against fp32 on the same operands, and each
Linear's Wgrad GEMM dW = dY^T X as the recipe computes it (NVFP4: RHT on both operands,
stochastic rounding on dY, ``fp4.wgrad``) against fp32 on the same dY and X. Memory: a few
K-long vectors per Linear, and the layers' inputs of one batch until its backward.
"""
from __future__ import annotations

import inspect

import torch
from torch import nn

from ...core.errors import CaptureError
from ...runtime.pytorch import fp4
from ...runtime.pytorch.losses import scalar_loss
from ...runtime.pytorch.user_code import describe

#: an NVFP4 block scale (448 * block amax / tensor amax) below E4M3's smallest normal
SUBNORMAL_SCALE = 2.0 ** -6
#: the seed of the stochastic rounding's draws (NVFP4 gradients)
SR_SEED = 0


def _blocks(t: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """A 2-D tensor as (blocks, values per block), padded with zeros to whole tiles."""
    r, c = tile
    m, n = t.shape
    t = torch.nn.functional.pad(t, (0, -n % c, 0, -m % r))
    m, n = t.shape
    return t.reshape(m // r, r, n // c, c).permute(0, 2, 1, 3).reshape(-1, r * c)


def operand_counts(x: torch.Tensor, fmt: str, role: str, per_channel: bool = False) -> dict:
    """One 2-D operand's (reduced dim last) counts under ``fmt``'s quantization for ``role``."""
    x = x.detach().float()
    q = fp4.quantize(x, fmt, role)
    back = q.dequantize()
    tile = fp4.tile_of(fmt, role)
    values, flushed = _blocks(x, tile), _blocks((back == 0) & (x != 0), tile)
    nonzero = (values != 0).sum(-1)
    live = nonzero > 0
    scales = _blocks(q.scales, tile)[:, 0]
    err = (back - x).square_()
    out = {"values": x.numel(), "nonzero": int(nonzero.sum()), "zeros": int(flushed.sum()),
           "signal": float(x.double().square().sum()), "noise": float(err.double().sum()),
           "blocks": int(live.sum()), "hollow": int((live & (2 * flushed.sum(-1) >= nonzero)).sum()),
           "subnormal": 0, "flushed": 0, "floor_clips": 0}
    if fmt == "nvfp4":
        out["subnormal"] = int((live & (scales > 0) & (scales < SUBNORMAL_SCALE)).sum())
        out["flushed"] = int((live & (scales == 0)).sum())
    else:
        out["floor_clips"] = int(fp4.mx_floor_clips(x).sum())
    if per_channel:
        out |= {"amax": x.abs().amax(dim=0).double(), "sq": x.square().sum(dim=0).double(),
                "error_sq": err.sum(dim=0).double()}
    return out


def _merge(old: dict | None, new: dict) -> dict:
    if old is None:
        return new
    merged = {k: old[k] + new[k] for k in ("values", "nonzero", "zeros", "signal", "noise", "blocks", "hollow",
                                           "subnormal", "flushed", "floor_clips")}
    if "amax" in old:
        merged |= {"amax": torch.maximum(old["amax"], new["amax"]), "sq": old["sq"] + new["sq"],
                   "error_sq": old["error_sq"] + new["error_sq"]}
    return merged


def _plain(counts: dict | None) -> dict | None:
    """Counts as plain numbers and lists (what the IR's graph attributes hold)."""
    if counts is None:
        return None
    return {k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in counts.items()}


def _sums(old: dict | None, signal: float, noise: float) -> dict:
    old = old or {"signal": 0.0, "noise": 0.0, "calls": 0}
    return {"signal": old["signal"] + signal, "noise": old["noise"] + noise, "calls": old["calls"] + 1}


def _error_sums(exact: torch.Tensor, got: torch.Tensor) -> tuple[float, float]:
    exact = exact.double()
    return float(exact.square().sum()), float((got.double() - exact).square().sum())


class Fp4Counts:
    """The FP4 counts of every ``nn.Linear`` of ``model`` under ``fmt``: its weight's (once, from
    the weights as loaded) and, over the batches ``run`` is handed, its inputs', its forward
    GEMM's and its Wgrad GEMM's."""

    def __init__(self, model: nn.Module, fmt: str | None):
        self.model, self.fmt = model, fmt
        self.raw: dict = {}
        self.generator = torch.Generator().manual_seed(SR_SEED)
        if fmt is None:
            return
        with torch.no_grad():
            for name, module in self._linears():
                w = module.weight
                if w.device.type != "meta" and w.dim() == 2 and w.shape[1] % fp4.tile_of(fmt, "input")[1] == 0:
                    self.raw[name] = {"calls": 0, "weight": operand_counts(w, fmt, "weight")}

    @property
    def enabled(self) -> bool:
        return self.fmt is not None

    def _linears(self):
        return [(name, m) for name, m in self.model.named_modules() if isinstance(m, nn.Linear) and name]

    def run(self, args, kwargs, seed: int, path: str, batch: int) -> None:
        """One fp32 forward and backward on the batch, every Linear's input, forward GEMM and
        Wgrad GEMM counted; the model's gradients are put back as they were."""
        if not self.enabled:
            return
        from ...runtime.pytorch.execution import strict_fp32

        kept = {p: (p.requires_grad, p.grad) for p in self.model.parameters()}
        handles = [m.register_forward_hook(self._hook(name)) for name, m in self._linears() if name in self.raw]
        try:
            for p in kept:
                p.requires_grad_(p.is_floating_point())
                p.grad = None
            with torch.enable_grad(), strict_fp32():
                outputs = self.model(*args, **_with_labels(self.model, kwargs))
                loss = _loss(outputs, seed)
                if loss is not None and loss.requires_grad:
                    loss.backward()
        except Exception as exc:  # noqa: BLE001 - the model's own error, not ours
            raise CaptureError(f"{path}: the fp32 forward and backward on calibration batch {batch} failed: "
                               f"{describe(exc)}") from exc
        finally:
            for h in handles:
                h.remove()
            for p, (requires, grad) in kept.items():
                p.requires_grad_(requires)
                p.grad = grad

    def _hook(self, name):
        def hook(module, args, out):
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0:
                return
            entry = self.raw[name]
            with torch.no_grad(), torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
                rows = x.detach().reshape(-1, x.shape[-1]).to(torch.bfloat16)  # what autocast hands the layer
                entry["input"] = _merge(entry.get("input"), operand_counts(rows, self.fmt, "input", per_channel=True))
                entry["calls"] += 1
                w = module.weight.detach().float()
                got = fp4.gemm(fp4.quantize(rows, self.fmt), fp4.quantize(w, self.fmt, "weight"))
                entry["gemm"] = _sums(entry.get("gemm"), *_error_sums(rows.float() @ w.t(), got))
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(self._wgrad(name, rows))
        return hook

    def _wgrad(self, name, rows):
        def on_grad(grad):
            with torch.no_grad(), torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
                dy = grad.detach().reshape(-1, grad.shape[-1]).to(torch.bfloat16)
                got = fp4.wgrad(rows, dy, self.fmt, self.generator)
                entry = self.raw[name]
                entry["wgrad"] = _sums(entry.get("wgrad"), *_error_sums(dy.float().t() @ rows.float(), got))
        return on_grad

    def records(self) -> dict:
        """module name -> its counts as plain numbers and lists."""
        return {name: {"format": self.fmt, "calls": e["calls"], "weight": _plain(e.get("weight")),
                       "input": _plain(e.get("input")), "gemm": e.get("gemm"), "wgrad": e.get("wgrad")}
                for name, e in self.raw.items()}


def _with_labels(model, kwargs: dict) -> dict:
    """An LM's batch with labels = its input_ids (the next-token loss Hugging Face models
    compute from them), where the forward takes labels and none are given."""
    if "input_ids" not in kwargs or "labels" in kwargs:
        return kwargs
    try:
        takes = "labels" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return kwargs
    return {**kwargs, "labels": kwargs["input_ids"]} if takes else kwargs


def _loss(outputs, seed: int):
    """The model's own scalar loss (``outputs.loss``), else a fixed random projection."""
    loss = getattr(outputs, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss.float().reshape(())
    return scalar_loss(outputs, seed)(outputs)
