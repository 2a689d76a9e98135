"""Which Linear GEMMs run in FP8 under an FP8 target (``--dtype float8``), and why the
others fall back to bf16: one ``Fp8Facts`` record per linear node, under ``node["fp8"]``.

What the libraries convert, from their own sources (the shape, the head, the conversion and
the tensor-parallel split are ``linear_gemms``'s, shared with the FP4 pass):
- torchao ``convert_to_float8_training`` and Transformer Engine swap ``nn.Linear`` *modules*
  (``Float8Linear`` / ``te.Linear``): an ``F.linear`` call outside one stays bf16.
- FP8 GEMMs (``torch._scaled_mm``, cuBLASLt) need K and N divisible by 16; MXFP8's 1x32
  scale blocks need 32. torchao's documented ``module_filter_fn`` (and torchtitan's) keeps
  layers whose dims are not multiples of 16 out of FP8; Transformer Engine asserts "FP8
  execution requires 2D input matrices with height divisible by 8 and width divisible by 16".
  Under ``--tp N`` the dims judged are one rank's.
- The last layer (the output head) is the layer both libraries' guidance keeps in bf16;
  ``output_head`` marks a linear that no other GEMM and no residual join follows (a final
  MLP projection added back into the stream is not the head), ``tied_to`` one whose weight
  is another module's (an embedding-tied LM head).
A module's own ``addmm`` (Hugging Face's ``Conv1D`` in GPT-2) is a GEMM no library converts:
it is recorded as a bf16 fallback so that the FLOP shares count it.
Nothing is written without an FP8 target: the other targets' graphs are unchanged.
"""
from __future__ import annotations

from .facts import Fp8Facts
from .linear_gemms import judged_gemms

#: the multiple K and N must have for each recipe's FP8 GEMM
MULTIPLE = {"mxfp8": 32}
DEFAULT_MULTIPLE = 16


def multiple_of(recipe: str) -> int:
    """The multiple K and N must have for ``recipe``'s FP8 GEMM."""
    return MULTIPLE.get(recipe, DEFAULT_MULTIPLE)


def dims_fallback(k: int, n: int, multiple: int, what: str = "FP8 GEMMs", tp: int = 1) -> str:
    """Why a K x N GEMM cannot run in ``what`` ("" when it can): the scan's and the check's words."""
    if not k % multiple and not n % multiple:
        return ""
    rank = f" on each of --tp {tp} ranks" if tp > 1 else ""
    return f"K={k}, N={n}{rank}: {what} need both divisible by {multiple}"


def annotate(graph):
    target = graph.graph.get("target")
    recipe = getattr(target, "fp8_recipe", None)
    if not recipe:
        return
    multiple = multiple_of(recipe)
    for name, node, shape, split, k, n, _ in judged_gemms(graph):
        fallback = shape.not_converted or dims_fallback(k, n, multiple, tp=target.tp)
        node["fp8"] = Fp8Facts(recipe=recipe, convertible=shape.convertible, runs_fp8=not fallback,
                               fallback=fallback, k=k, n=n, m=shape.m, multiple=multiple,
                               output_head=shape.output_head, tied_to=shape.tied_to, split=split,
                               full_k=shape.k, full_n=shape.n)
