"""Which Linears of a live model a ``check --dtype float8|nvfp4|mxfp4`` variant runs in FP8 or
FP4, and running them so.

The choice is analysis/fp8.py's and analysis/fp4.py's, made on the module instead of the
captured graph: torchao and Transformer Engine swap ``nn.Linear`` modules (subclasses
included) whose K (``in_features``) and N (``out_features``) are multiples of the recipe's
block (FP8 16, MXFP8 32, NVFP4 16, MXFP4 32); the plan's ``keep_out_of_fp8`` /
``keep_out_of_fp4`` (exact module paths) stay bf16. While a variant runs, each chosen
module's forward is the ``linear`` of runtime/pytorch/fp8.py or fp4.py (FP4: its backward
too, the recipe's Dgrad and Wgrad GEMMs); every other op runs under the variant's bf16
autocast as before.

Each quantized GEMM is also measured on its own: its output against the same GEMM in fp32 on
the same operands (the input as the GEMM received it, the fp32 weight), as torchao's tests
measure one FP8 or FP4 GEMM (SQNR, ``compute_error``). The check's verdict holds every GEMM to
``gemm_snr_db`` (check/tolerance.py): an outlier channel that flushes a Linear's other
inputs to zero costs that GEMM its whole output, even where the model's output, carried by
a residual stream, loses only a few dB.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ...analysis import fp4 as fp4_pass
from ...analysis.fp8 import dims_fallback, multiple_of
from ...core.target import FP4_FORMATS
from ...runtime.pytorch import fp4, fp8
from ..metrics import report_number

#: the stochastic rounding's draws (NVFP4 gradients) start from the check's seed plus this
SR_STREAM = 0x5EED
#: the name the FLOP counter counts each kind's GEMMs under (gemm_format.current)
FORMAT_NAMES = {"fp8": fp8.FORMAT_NAME, "fp4": fp4.FORMAT_NAME}


def emulation_note(recipe: str) -> str:
    """The report's note on what the FP8 (or FP4) variants computed."""
    if recipe in FP4_FORMATS:
        return fp4_note(recipe)
    scales = {"tensorwise": "one scale per tensor, 448/amax",
              "rowwise": "per token row of the input and per output row of the weight, 448/amax rounded "
                         "down to a power of 2",
              "delayed": "one scale per tensor from the amax history, taken as the current amax (one "
                         "batch has no history: TE's steady state, not its first step at scale 1)",
              "mxfp8": "blocks of 32 along K, one E8M0 (power of 2) scale each, 2^ceil(log2(amax/448))"}
    scales["rowwise_with_gw_hp"] = scales["rowwise"] + " (its high-precision weight gradient is backward only)"
    return (f"FP8 GEMMs emulated ({recipe}): the eligible nn.Linears' input (cast to bf16) and weight "
            f"quantized to float8_e4m3fn ({scales[recipe]}), products accumulated in float32, output "
            "rounded to bf16, bias added after; forward only (no E5M2 gradients)")


def fp4_note(fmt: str) -> str:
    """The report's note on what the FP4 variants computed."""
    if fmt == "nvfp4":
        how = ("NVFP4 as Transformer Engine's reference quantizer and NVFP4BlockScaling recipe compute it: "
               "E2M1 values in 1x16 blocks (weights in 16x16 tiles) with E4M3 block scales under a per-tensor "
               "FP32 scale (448 * 6 / amax); the backward's Dgrad with stochastic rounding on the gradient, its "
               "Wgrad with a 16-point random Hadamard transform on both operands along the tokens and "
               "stochastic rounding on the gradient (seeded draws)")
    else:
        how = ("MXFP4 as the OCP MX spec defines it: E2M1 values in 1x32 blocks with E8M0 (power of 2) scales "
               "2^ceil(log2(amax / 6)) (TE's reference and torchao's RCEIL; the spec's floor rule would clip), "
               "every GEMM's operands blocked along its reduced dim, rounded to nearest")
    return (f"FP4 GEMMs emulated ({fmt}): the eligible nn.Linears' input (cast to bf16) and weight (its fp32 "
            f"copy) quantized to {how}; products accumulated in float32, output rounded to bf16, bias added after")


@dataclass
class Choice:
    """``modules``: the Linears run in FP8/FP4; ``fallback``: {path: why not}; ``kept``: the
    plan's keep_out_of_fp8/fp4 entries that matched; ``unmatched``: those that matched no
    Linear; ``sums``: {path: [signal, noise]} of its quantized GEMM against fp32, over the
    calls that ran; ``generator``: the stochastic rounding's draws (FP4)."""

    recipe: str  # an FP8 recipe or an FP4 format
    modules: list[str] = field(default_factory=list)
    fallback: dict[str, str] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    sums: dict[str, list[float]] = field(default_factory=dict)
    generator: torch.Generator | None = None

    @property
    def kind(self) -> str:
        """The report's key for it: fp4 or fp8."""
        return "fp4" if self.recipe in FP4_FORMATS else "fp8"

    def gemm_snr_db(self) -> dict[str, float | None]:
        """{path: SQNR in dB of its quantized GEMM against the fp32 GEMM of the same operands}, for the
        Linears that ran; None where there is no error (or no signal: zero operands, zero output)."""
        return {path: 10 * math.log10(signal / noise) if signal and noise else None
                for path, (signal, noise) in self.sums.items()}

    def worst_gemm(self) -> tuple[str, float | None] | None:
        """(path, SQNR) of the quantized GEMM with the lowest SQNR; None when none ran."""
        snr = self.gemm_snr_db()
        if not snr:
            return None
        path = min(snr, key=lambda p: math.inf if snr[p] is None else snr[p])
        return path, snr[path]

    def as_dict(self) -> dict:
        worst = self.worst_gemm()
        name = {"format": self.recipe} if self.kind == "fp4" else {"recipe": self.recipe}
        return {**name, "linears": len(self.modules), "kept_out": list(self.kept),
                "fallback": dict(self.fallback), "unmatched": list(self.unmatched),
                "gemm_snr_db": {p: report_number(v) for p, v in self.gemm_snr_db().items()},
                "worst_gemm": None if worst is None else {"module": worst[0], "snr_db": report_number(worst[1])}}

    def below(self, gemm_snr_db: float | None) -> dict | None:
        """The first divergence of a variant whose worst quantized GEMM is below ``gemm_snr_db``
        (that GEMM, as its ``linear`` op), or None."""
        worst = self.worst_gemm()
        if gemm_snr_db is None or worst is None or worst[1] is None or worst[1] >= gemm_snr_db:
            return None
        return {"module": worst[0], "op": "linear", "line": None, "snr_db": report_number(worst[1]),
                "nonfinite": 0, "kind": "exceeds_tolerance"}


def choose(model: torch.nn.Module, recipe: str, keep_out=(), seed: int = 0) -> Choice:
    """The Linears of ``model`` that run in FP8 or FP4 under ``recipe`` (an FP8 recipe or an
    FP4 format) with ``keep_out`` left bf16."""
    fp4_format = recipe in FP4_FORMATS
    multiple = fp4_pass.multiple_of(recipe) if fp4_format else multiple_of(recipe)
    what = f"{recipe.upper()} GEMMs" if fp4_format else "FP8 GEMMs"
    keep = set(keep_out)
    choice = Choice(recipe, generator=torch.Generator().manual_seed(seed + SR_STREAM) if fp4_format else None)
    for path, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        fallback = dims_fallback(module.in_features, module.out_features, multiple, what)
        if path in keep:
            choice.kept.append(path)
        elif fallback:
            choice.fallback[path] = fallback
        else:
            choice.modules.append(path)
    choice.unmatched = [p for p in keep_out if p not in choice.kept]
    return choice


def patch(model: torch.nn.Module, choice: Choice) -> list:
    """Make the chosen Linears' forwards FP8/FP4 GEMMs (hooks still run, as around any
    forward); the patched modules, for ``unpatch``."""
    patched = []
    for path in choice.modules:
        module = model.get_submodule(path)
        module.forward = _quantized_forward(module, path, choice)
        patched.append(module)
    return patched


def unpatch(patched: list) -> None:
    for module in patched:
        del module.forward


@contextlib.contextmanager
def quantized_linears(model: torch.nn.Module, choice: Choice):
    """Run the chosen Linears as FP8/FP4 GEMMs while the context is open (the module's own
    ``forward`` is back on exit)."""
    patched = patch(model, choice)
    try:
        yield
    finally:
        unpatch(patched)


def _quantized_forward(module: torch.nn.Linear, path: str, choice: Choice):
    def forward(input):
        if choice.kind == "fp4":
            out = fp4.linear(input, module.weight, module.bias, fmt=choice.recipe, generator=choice.generator)
        else:
            out = fp8.linear(input, module.weight, module.bias, recipe=choice.recipe)
        _measure(choice.sums.setdefault(path, [0.0, 0.0]), input, module, out)
        return out
    return forward


def _measure(sums: list, input: torch.Tensor, module: torch.nn.Linear, out: torch.Tensor) -> None:
    """Add the signal and noise of one quantized GEMM call to ``sums``: ``out`` less its bias
    against the fp32 product of the operands the GEMM quantized (the input cast as the
    ``linear`` casts it). No mode of the run sees this arithmetic: it is no op of the model."""
    device = input.device.type
    operand = input.to(torch.get_autocast_dtype(device)) if torch.is_autocast_enabled(device) else input
    with torch.no_grad(), torch._C.DisableTorchFunction(), _disable_current_modes(), \
            torch.autocast(device, enabled=False):
        exact = operand.float() @ module.weight.float().t()
        got = out.float() if module.bias is None else out.float() - module.bias.to(out.dtype).float()
        sums[0] += float(exact.double().square().sum())
        sums[1] += float((got - exact).double().square().sum())
