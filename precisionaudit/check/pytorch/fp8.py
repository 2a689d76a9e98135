"""Which Linears of a live model a ``check --dtype float8`` variant runs in FP8, and running them so.

The choice is analysis/fp8.py's, made on the module instead of the captured graph:
torchao's ``convert_to_float8_training`` and Transformer Engine swap ``nn.Linear`` modules
(subclasses included) whose K (``in_features``) and N (``out_features``) are multiples of
16 (32 for mxfp8); the plan's ``keep_out_of_fp8`` (exact module paths) stay bf16. While a
variant runs, each chosen module's forward is the FP8 ``linear`` of runtime/pytorch/fp8.py;
every other op runs under the variant's bf16 autocast as before.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ...analysis.fp8 import dims_fallback, multiple_of
from ...runtime.pytorch import fp8


def emulation_note(recipe: str) -> str:
    """The report's note on what the FP8 variants computed."""
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


@dataclass
class Fp8Choice:
    """``modules``: the Linears run in FP8; ``fallback``: {path: why not}; ``kept``: the
    plan's keep_out_of_fp8 entries that matched; ``unmatched``: those that matched no Linear."""

    recipe: str
    modules: list[str] = field(default_factory=list)
    fallback: dict[str, str] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"recipe": self.recipe, "linears": len(self.modules), "kept_out": list(self.kept),
                "fallback": dict(self.fallback), "unmatched": list(self.unmatched)}


def choose(model: torch.nn.Module, recipe: str, keep_out=()) -> Fp8Choice:
    """The Linears of ``model`` that run in FP8 under ``recipe`` with ``keep_out`` left bf16."""
    multiple = multiple_of(recipe)
    keep = set(keep_out)
    choice = Fp8Choice(recipe)
    for path, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        fallback = dims_fallback(module.in_features, module.out_features, multiple)
        if path in keep:
            choice.kept.append(path)
        elif fallback:
            choice.fallback[path] = fallback
        else:
            choice.modules.append(path)
    choice.unmatched = [p for p in keep_out if p not in choice.kept]
    return choice


@contextlib.contextmanager
def fp8_linears(model: torch.nn.Module, choice: Fp8Choice):
    """Run the chosen Linears' forwards as FP8 GEMMs while the context is open (the
    module's own ``forward`` is back on exit; hooks still run, as around any forward)."""
    patched = []
    for path in choice.modules:
        module = model.get_submodule(path)
        module.forward = _fp8_forward(module, choice.recipe)
        patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward


def _fp8_forward(module: torch.nn.Linear, recipe: str):
    def forward(input):
        return fp8.linear(input, module.weight, module.bias, recipe=recipe)
    return forward
