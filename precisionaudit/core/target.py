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
#: the 4-bit block-scaled formats, each its own ``--dtype`` (and its own recipe): NVFP4 as
#: Transformer Engine's NVFP4BlockScaling runs it, MXFP4 as the OCP Microscaling spec defines it
FP4_FORMATS = ("nvfp4", "mxfp4")
#: what ``--dtype`` takes on scan, plan and explain: float8 is bf16 autocast plus FP8 Linears,
#: nvfp4 and mxfp4 bf16 autocast plus FP4 Linears
TARGET_DTYPES = (*DTYPES, "float8", *FP4_FORMATS)


@dataclass(frozen=True)
class Target:
    """Which autocast policy (or pure low-precision model) the ops are judged under.

    A quantized-Linear target (``recipe`` set) is bf16 autocast with every eligible Linear
    GEMM in FP8 (``recipe`` one of FP8_RECIPES) or FP4 (``recipe`` one of FP4_FORMATS):
    ``dtype`` stays ``bfloat16`` so that capture and every bf16 rule judge the program that
    really runs around those GEMMs; ``named_dtype`` is what the user asked for. ``tp``: the
    tensor-parallel degree whose per-rank GEMM shapes the FP8/FP4 eligibility judges.
    """

    dtype: str = "float16"
    mode: str = "autocast"
    device: str = "cuda"
    recipe: str | None = None  # an FP8 recipe (FP8_RECIPES) or an FP4 format; None: no quantized GEMMs
    tp: int = 1

    def __post_init__(self):
        for value, allowed, what in ((self.dtype, DTYPES, "dtype"), (self.mode, MODES, "mode"),
                                     (self.device, DEVICES, "device")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")
        if self.recipe is not None and (self.recipe not in (*FP8_RECIPES, *FP4_FORMATS)
                                        or self.dtype != "bfloat16" or self.mode != "autocast"):
            raise ValueError(f"recipe {self.recipe!r} needs bfloat16 autocast and one of "
                             f"{', '.join((*FP8_RECIPES, *FP4_FORMATS))}")
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise ValueError(f"--tp {self.tp!r}: the tensor-parallel degree is a whole number of at least 1")
        if self.tp > 1 and self.recipe is None:
            raise ValueError("--tp judges the per-rank shapes of FP8/FP4 GEMMs: it needs --dtype float8, "
                             "nvfp4 or mxfp4")

    @classmethod
    def named(cls, dtype: str, mode: str = "autocast", device: str = "cuda", recipe: str | None = None,
              tp: int = 1) -> Target:
        """The target of the command-line flags: ``--dtype float8`` is bf16 autocast with
        FP8 Linears under ``recipe`` (default tensorwise), ``--dtype nvfp4|mxfp4`` with FP4
        Linears in that format. ValueError says what is wrong."""
        if dtype in ("float8", *FP4_FORMATS):
            kind = "FP8" if dtype == "float8" else "FP4"
            if mode != "autocast":
                raise ValueError(f"--dtype {dtype} is bf16 autocast with {kind} Linears; it takes no --mode pure")
            if dtype in FP4_FORMATS and recipe is not None:
                raise ValueError(f"--recipe {recipe} is an FP8 recipe; --dtype {dtype} is its own recipe "
                                 f"({'NVFP4BlockScaling' if dtype == 'nvfp4' else 'OCP MX'}): drop --recipe")
            return cls("bfloat16", mode, device, recipe or ("tensorwise" if dtype == "float8" else dtype), tp)
        if recipe is not None:
            raise ValueError("--recipe needs --dtype float8")
        return cls(dtype, mode, device, None, tp)

    @property
    def fp4(self) -> str | None:
        """The FP4 format of an FP4 target (nvfp4, mxfp4); None otherwise."""
        return self.recipe if self.recipe in FP4_FORMATS else None

    @property
    def fp8_recipe(self) -> str | None:
        """The FP8 recipe of an FP8 target; None otherwise."""
        return self.recipe if self.recipe in FP8_RECIPES else None

    @property
    def named_dtype(self) -> str:
        """The ``--dtype`` this target was named by: float8 for an FP8 target, the format
        for an FP4 one."""
        return self.fp4 or ("float8" if self.recipe else self.dtype)

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def as_dict(self) -> dict:
        tp = {"tp": self.tp} if self.tp != 1 else {}
        if self.fp4:
            return {"dtype": self.fp4, "mode": self.mode, "device": self.device, **tp}
        if self.recipe:
            return {"dtype": "float8", "recipe": self.recipe, "mode": self.mode, "device": self.device, **tp}
        return {"dtype": self.dtype, "mode": self.mode, "device": self.device}
