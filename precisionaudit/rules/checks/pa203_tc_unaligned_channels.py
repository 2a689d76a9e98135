"""PA203 tc-unaligned-channels: conv in/out channels not a multiple of 8."""
from __future__ import annotations

from ..registry import Hit, check, param
from .gemm_shapes import ALIGN, node_of_module, padded


def _ran(graph, module) -> bool:
    """A module with an op in the captured forward (every module, for a structure-only scan)."""
    return graph.graph.get("structure_only", False) or node_of_module(graph, module) is not None


@check
def tc_unaligned_channels(graph, target):
    hits = []
    multiple = ALIGN[target.dtype]
    for module, facts in graph.graph.get("modules", {}).items():
        if "in_channels" not in facts or facts.get("groups", 1) > 1 or not _ran(graph, module):
            continue  # grouped/depthwise convs have no Tensor Core path to lose
        bad = [(k, facts[k]) for k in ("in_channels", "out_channels") if facts[k] % multiple]
        if not bad:
            continue
        which, size = bad[0]
        up, _ = padded(size, multiple)
        case = None
        if all(n <= param("input_layer_channels") for _, n in bad):
            # an RGB/audio input layer, an image/latent/few-class output: the data fixes it
            case = "input-layer" if which == "in_channels" else "output-layer"
        hits.append(Hit(node_of_module(graph, module),
                        {"channels": which, "size": size, "padded": up, "module_type": facts["type"]},
                        module=module, case=case))
    return hits
