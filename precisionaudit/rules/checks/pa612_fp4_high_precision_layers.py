"""PA612 fp4-high-precision-layers: the Linears the FP4 recipes keep in bf16 run in FP4: the
output head, and the first and last blocks of NVIDIA's NVFP4 recipe."""
from __future__ import annotations

from ...analysis.facts import fact
from ..registry import Hit, check, param
from .fp4_gemms import block_ranges, recipe_blocks
from .plan_region import number


@check
def fp4_high_precision_layers(graph, target):
    linears = [(name, node, node["fp4"]) for name, node in graph.nodes(data=True) if fact(node, "fp4.format")]
    hits = []
    for name, node, facts in linears:
        if facts.runs_fp4 and facts.output_head:
            tied = f", its weight tied to {facts.tied_to}" if facts.tied_to else ""
            hits.append(Hit(name, {
                "what": f"{node['op']} in {node['module']} is the model's output head ({facts.n}x{facts.k}{tied}): "
                        f"under --dtype {facts.format} it runs in FP4, where Transformer Engine's NVFP4 recipe, "
                        "torchao's examples and Megatron-LM keep the output layer in bf16",
                "to": f"keep {node['module']} out of FP4 (plan --dtype {facts.format} writes the filter for every "
                      "library)", "keep": True}, case="output-head"))
    stacked = [(name, node, f) for name, node, f in linears if f.block is not None]
    if not stacked:
        return hits
    blocks, stack = stacked[0][2].blocks, stacked[0][2].stack
    first, last = recipe_blocks(blocks, param("first_share"), param("last_share"))
    kept = set(range(first)) | set(range(blocks - last, blocks))
    fp4 = [(name, node, f) for name, node, f in linears if f.runs_fp4 and not f.output_head]
    inside = [(name, node, f) for name, node, f in fp4 if f.block in kept]
    if not inside:
        return hits
    total = sum(f.flops for _, _, f in fp4)
    share = sum(f.flops for _, _, f in inside) / total if total else None
    share_text = f", {share:.1%} of the FP4 Linear FLOPs" if share is not None else ""
    where = ", ".join(f"{stack}.{run}" if stack else run for run in block_ranges(kept).split(", "))
    name = next(n for n, _, f in inside if f.block == max(kept))
    hits.append(Hit(name, {
        "what": f"block{'s' * (len(kept) > 1)} {block_ranges(kept)} of the {blocks} in {stack or '<root>'} "
                f"({len(inside)} of the {len(fp4)} "
                f"FP4 Linears{share_text}) run in FP4; NVIDIA's NVFP4 recipe keeps the Linears of the first "
                f"{param('first_share'):.1%} and the last {param('last_share'):.1%} of the blocks in bf16 (its 12B "
                "model: the first 2 and last 8 blocks, about 16% of the Linears; a 1.2B model diverged with none kept)",
        "to": f"keep {where} in bf16: Megatron-LM --first-last-layers-bf16 --num-layers-at-start-in-bf16 {first} "
              f"--num-layers-at-end-in-bf16 {last}; plan --dtype {fp4[0][2].format} --data grows the fewest from "
              "measured errors",
        "first": first, "last": last, "blocks": blocks, "kept_share": number(share) if share is not None else None},
        case="recipe-blocks", module=stack))
    return hits
