"""The precision target a scan judges against, kept free of torch so the CLI starts fast.

pre-commit hands the hook every changed Python file; most are not models, and deciding
that must not cost a 1-2 s torch import.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float16", "bfloat16")
MODES = ("autocast", "pure")
DEVICES = ("cuda", "cpu")
#: the FP8 training recipes ``--dtype float8`` takes: torchao's Float8LinearRecipeName values
#: (tensorwise, rowwise, rowwise_with_gw_hp), Transformer Engine's DelayedScaling and MXFP8
FP8_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp", "delayed", "mxfp8")
#: what ``--dtype`` takes on scan, plan and explain: float8 is bf16 autocast plus FP8 Linears
TARGET_DTYPES = (*DTYPES, "float8")


@dataclass(frozen=True)
class Target:
    """Which autocast policy (or pure low-precision model) the ops are judged under.

    An FP8 target (``recipe`` set) is bf16 autocast with every eligible Linear GEMM in FP8:
    ``dtype`` stays ``bfloat16`` so that capture and every bf16 rule judge the program that
    really runs around the FP8 GEMMs; ``named_dtype`` is what the user asked for.
    """

    dtype: str = "float16"
    mode: str = "autocast"
    device: str = "cuda"
    recipe: str | None = None  # an FP8 recipe (FP8_RECIPES); None: no FP8 GEMMs

    def __post_init__(self):
        for value, allowed, what in ((self.dtype, DTYPES, "dtype"), (self.mode, MODES, "mode"),
                                     (self.device, DEVICES, "device")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")
        if self.recipe is not None and (self.recipe not in FP8_RECIPES or self.dtype != "bfloat16"
                                        or self.mode != "autocast"):
            raise ValueError(f"FP8 recipe {self.recipe!r} needs bfloat16 autocast and one of "
                             f"{', '.join(FP8_RECIPES)}")

    @classmethod
    def named(cls, dtype: str, mode: str = "autocast", device: str = "cuda", recipe: str | None = None) -> Target:
        """The target of the command-line flags: ``--dtype float8`` is bf16 autocast with
        FP8 Linears under ``recipe`` (default tensorwise). ValueError says what is wrong."""
        if dtype == "float8":
            if mode != "autocast":
                raise ValueError("--dtype float8 is bf16 autocast with FP8 Linears; it takes no --mode pure")
            return cls("bfloat16", mode, device, recipe or "tensorwise")
        if recipe is not None:
            raise ValueError("--recipe needs --dtype float8")
        return cls(dtype, mode, device)

    @property
    def named_dtype(self) -> str:
        """The ``--dtype`` this target was named by: float8 for an FP8 target."""
        return "float8" if self.recipe else self.dtype

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def as_dict(self) -> dict:
        if self.recipe:
            return {"dtype": "float8", "recipe": self.recipe, "mode": self.mode, "device": self.device}
        return {"dtype": self.dtype, "mode": self.mode, "device": self.device}
