"""``plan --dtype nvfp4|mxfp4``: the Linears to keep in bf16, and the forms users paste.

Which Linears (``keep_out_of_fp4``, exact module paths):
- every Linear the format cannot run (PA611: K or N off the block on a rank) and the output
  head (PA612): the recipes keep both out whatever the data says;
- with measurements (``--weights``/``--data``: PA613-PA617, the layers whose measured FP4
  error is past its bound), the fewest blocks of the block stack that hold every such layer,
  grown from the ends as NVIDIA's recipe and Megatron-LM grow them (``first`` blocks at the
  start, ``last`` at the end, the fewest in all; a tie goes to the end), and each such layer
  outside the stack by itself;
- without measurements, the recipe's own blocks: PA612's (the first 3.2% and last 12.9% of the
  stack, NVIDIA's 12B run).
Every Linear of a kept block is kept (Megatron's unit is the block). The header says which
share of the Linear FLOPs stays in FP4 and writes the plan as torchao's ``filter_fn``,
Transformer Engine's per-layer choice, Megatron-LM's arguments, and ModelOpt's and
llm-compressor's ignore lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.linear_gemms import BlockStack
from ..core.findings import SEVERITY_RANK
from ..core.numerics import TORCHAO_NVFP4_MULTIPLE as TORCHAO_MULTIPLE

#: the FP4 rules a plan reads; PA611 and PA612's head case keep a Linear out whatever its severity
FP4_RULES = ("PA611", "PA612", "PA613", "PA614", "PA615", "PA616", "PA617")
MEASURED = ("PA613", "PA614", "PA615", "PA616", "PA617")


@dataclass
class Fp4Keep:
    """What the plan keeps in bf16 and why."""

    modules: list[str] = field(default_factory=list)  # keep_out_of_fp4, in module order
    first: int = 0  # blocks kept at the start of the stack
    last: int = 0  # and at the end
    stack: str | None = None
    blocks: int | None = None
    measured: bool = False  # grown from measured errors (else the recipe's default blocks)
    failing: list[str] = field(default_factory=list)  # the measured layers past their bound
    recipe_default: tuple[int, int] | None = None  # PA612's (first, last)
    fp4_share: float | None = None  # share of the nn.Linear FLOPs (one rank's) left in FP4
    reasons: dict = field(default_factory=dict)  # module -> why (the first rule that keeps it)


def keep_out(findings, graph, min_severity: str) -> Fp4Keep:
    """The Linears to keep in bf16 under an FP4 target (see the module docstring)."""
    threshold = SEVERITY_RANK[min_severity]
    linears = _linears(graph)
    keep = Fp4Keep()
    stacked = [f for f in linears.values() if f.block is not None]
    if stacked:
        keep.stack, keep.blocks = stacked[0].stack, stacked[0].blocks
    for f in findings:
        if f.rule == "PA612" and f.evidence.get("first") is not None:
            keep.recipe_default = (f.evidence["first"], f.evidence["last"])
    for f in findings:  # the Linears a recipe cannot run or never runs in FP4, whatever the severity
        if f.rule in ("PA611", "PA612") and f.evidence.get("keep"):
            keep.reasons.setdefault(f.module, f.rule)
    measured = [f for f in findings if f.rule in MEASURED and SEVERITY_RANK[f.severity] <= threshold]
    keep.measured = any(node.get("fp4_range") is not None for _, node in graph.nodes(data=True))
    keep.failing = list(dict.fromkeys(f.module for f in measured))
    for f in measured:
        keep.reasons.setdefault(f.module, f.rule)
    if keep.stack is not None:
        if keep.measured:
            blocks = sorted({linears[m].block for m in keep.failing if m in linears and linears[m].block is not None})
            keep.first, keep.last = fewest_blocks(blocks, keep.blocks)
        elif keep.recipe_default is not None:
            keep.first, keep.last = keep.recipe_default
    kept_blocks = set(range(keep.first)) | set(range((keep.blocks or 0) - keep.last, keep.blocks or 0))
    chosen = set(keep.reasons) & set(linears) | {m for m in keep.failing if m in linears}
    for module, facts in linears.items():
        if facts.block in kept_blocks and facts.convertible:
            chosen.add(module)
            keep.reasons.setdefault(module, "block")
    keep.modules = [m for m in linears if m in chosen]
    total = sum(f.flops for f in linears.values())  # every nn.Linear's: those the format cannot run too
    stays = sum(f.flops for m, f in linears.items() if f.runs_fp4 and m not in chosen)
    keep.fp4_share = stays / total if total else None
    return keep


def fewest_blocks(failing: list[int], blocks: int) -> tuple[int, int]:
    """(first, last): the fewest blocks at the two ends of a stack of ``blocks`` that hold every
    block of ``failing``; of equal counts, the one with more at the end."""
    if not failing:
        return 0, 0
    best = None
    for split in range(len(failing) + 1):  # failing[:split] from the start, the rest from the end
        first = failing[split - 1] + 1 if split else 0
        last = blocks - failing[split] if split < len(failing) else 0
        key = (first + last, first)
        if best is None or key < best[0]:
            best = (key, (first, last))
    return best[1]


def _linears(graph) -> dict:
    """module -> Fp4Facts of each nn.Linear module the FP4 pass judged, in forward order."""
    found = {}
    for _, node in graph.nodes(data=True):
        facts = node.get("fp4")
        if facts is not None and facts.convertible and node["module"] not in found:
            found[node["module"]] = facts
    return found


# --------------------------------------------------------------------------- the header
def paste_lines(keep: Fp4Keep, fmt: str) -> list[str]:
    """The plan as users paste it into each library, and what it keeps in FP4."""
    names = ", ".join(repr(m) for m in keep.modules)
    share = "n/a" if keep.fp4_share is None else f"{keep.fp4_share:.1%}"
    why = ("grown from the measured errors (PA613-PA617) from the ends of the stack" if keep.measured
           else "NVIDIA's recipe default (PA612): measure with --data to grow the fewest from the errors")
    lines = [f"keep_out_of_fp4 lists the Linears to leave in bf16 ({len(keep.modules)}); {share} of the Linear "
             f"FLOPs stay in {fmt.upper()} (check --dtype {fmt} --plan emulates it)."]
    if keep.stack is not None:
        lines.append(f"blocks of {keep.stack} kept in bf16: the first {keep.first} and the last {keep.last} of "
                     f"{keep.blocks}, {why}")
        if keep.measured and keep.recipe_default is not None and keep.recipe_default != (keep.first, keep.last):
            lines.append(f"    (NVIDIA's recipe would keep the first {keep.recipe_default[0]} and the last "
                         f"{keep.recipe_default[1]})")
    if keep.failing:
        lines.append(f"layers whose measured FP4 error is past its bound: {', '.join(keep.failing)}")
    lines += _torchao(names, fmt) + _transformer_engine(names, fmt) + _megatron(keep, fmt)
    lines += _modelopt(keep.modules, fmt) + _llm_compressor(keep.modules, fmt)
    return lines


def _torchao(names: str, fmt: str) -> list[str]:
    if fmt == "nvfp4":
        config = ["    from torchao.prototype.moe_training.nvfp4_training.nvfp4_training import NVFP4TrainingConfig",
                  "    quantize_(model, NVFP4TrainingConfig(), filter_fn=lambda mod, fqn: isinstance(mod, "
                  "torch.nn.Linear) and fqn not in KEEP_BF16",
                  f"              and mod.in_features % {TORCHAO_MULTIPLE} == 0 and mod.out_features % "
                  f"{TORCHAO_MULTIPLE} == 0)  # its kernels need every dim % {TORCHAO_MULTIPLE}"]
    else:
        config = ["    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig  # inference: "
                  "torchao 0.18 trains no MXFP4",
                  "    quantize_(model, MXDynamicActivationMXWeightConfig(activation_dtype=torch.float4_e2m1fn_x2, "
                  "weight_dtype=torch.float4_e2m1fn_x2),",
                  "              filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Linear) and fqn not in KEEP_BF16)"]
    return ["torchao (quantize_ with a filter_fn):", f"    KEEP_BF16 = {{{names}}}",
            "    from torchao.quantization import quantize_", *config]


def _transformer_engine(names: str, fmt: str) -> list[str]:
    if fmt != "nvfp4":
        return ["Transformer Engine: no MXFP4 recipe (MXFP8BlockScaling is MXFP8); build these as torch.nn.Linear:",
                f"    [{names}]"]
    return ["Transformer Engine (NVFP4BlockScaling): build these as torch.nn.Linear and the others as te.Linear, or",
            "keep te.Linear everywhere and run these outside FP4:",
            "    import transformer_engine.pytorch as te",
            "    from transformer_engine.common.recipe import NVFP4BlockScaling",
            f"    KEEP_BF16 = [{names}]",
            "    def bf16(forward):",
            "        def run(*args, **kwargs):",
            "            with te.autocast(enabled=False):",
            "                return forward(*args, **kwargs)",
            "        return run",
            "    for name in KEEP_BF16:",
            "        model.get_submodule(name).forward = bf16(model.get_submodule(name).forward)",
            "    with te.autocast(enabled=True, recipe=NVFP4BlockScaling()):",
            "        loss = model(batch)"]


def _megatron(keep: Fp4Keep, fmt: str) -> list[str]:
    if keep.stack is None:
        return ["Megatron-LM: no stack of blocks found; its output layer is never FP4"]
    recipe = "--fp4-format e2m1 --fp4-recipe nvfp4" if fmt == "nvfp4" else \
        "(its --fp4-recipe is nvfp4; for MXFP4 keep the same blocks with --first-last-layers-bf16)"
    lines = ["Megatron-LM (its output layer is never FP4):",
             f"    {recipe} --first-last-layers-bf16 --num-layers-at-start-in-bf16 {keep.first} "
             f"--num-layers-at-end-in-bf16 {keep.last}"]
    loose = [m for m, why in keep.reasons.items() if why not in ("block", "PA612") and not _in_kept_block(m, keep)]
    if loose:
        lines.append(f"    not expressible there (outside the kept blocks): {', '.join(loose)}")
    return lines


def _in_kept_block(module: str, keep: Fp4Keep) -> bool:
    block = BlockStack(keep.stack, keep.blocks).index_of(module)
    return block is not None and (block < keep.first or block >= keep.blocks - keep.last)


def _modelopt(modules: list[str], fmt: str) -> list[str]:
    config = "NVFP4_DEFAULT_CFG" if fmt == "nvfp4" else "MXFP4_DEFAULT_CFG"
    patterns = ", ".join(repr(f"{m}.*") for m in modules)  # the quantizers' names: module path + "._quantizer"
    return ["ModelOpt (mtq.quantize):",
            f"    cfg = copy.deepcopy(mtq.{config})",
            f"    for pattern in [{patterns}]:",
            "        cfg[\"quant_cfg\"][pattern] = {\"enable\": False}  # list-form quant_cfg: "
            "append({\"quantizer_name\": pattern, \"enable\": False})",
            "    model = mtq.quantize(model, cfg, forward_loop)"]


def _llm_compressor(modules: list[str], fmt: str) -> list[str]:
    ignore = ", ".join(repr(m) for m in modules)
    return ["llm-compressor (QuantizationModifier):",
            f"    QuantizationModifier(targets=\"Linear\", scheme=\"{fmt.upper()}\", ignore=[{ignore}])"]
