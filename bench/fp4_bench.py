"""FP4 (--dtype nvfp4|mxfp4) on real architectures from their configs (issue 45).

    python bench/fp4_bench.py                    # every part
    python bench/fp4_bench.py --part scan        # published configs at full size, on fake tensors
    python bench/fp4_bench.py --part measure     # small published configs, seeded weights, --data
    python bench/fp4_bench.py --part train       # a small LM trained on CPU in emulated NVFP4

scan: each published config (Llama-3-8B, Qwen2.5-7B, Mixtral-8x7B, ViT-H/14, Mamba-2 2.7B; the
values are the configs' own, written out here: no hub) scanned under nvfp4 and mxfp4, with and
without --tp 8: the Linears that cannot run the format (PA611, warnings), those only torchao's
NVFP4 training refuses (PA611 info), the bf16 Linears plan keeps without data (the head and
NVIDIA's first/last blocks) and the share of Linear FLOPs left in FP4, and the scan's time.

measure: small published configs (SmolLM2-135M, Qwen2.5-0.5B, ViT-S/16, Mamba-2 130M; Mixtral's
architecture at a reduced size: no small Mixtral exists) with seeded weights and --data example:
each Linear's emulated SQNR (input, weight, forward GEMM, Wgrad GEMM), the plan grown from the
measured errors, and check's output SNR without and with the plan; the plan's time.

train: a small LM (8 blocks) trained a few hundred steps on a Markov-chain language, fp32 against
emulated NVFP4 as is, with the plan's bf16 layers, and with as many bf16 Linears taken from the
other end (a control): the loss gap each leaves.
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# one thread: on a shared machine torch's two spinning threads ran the FP4 emulation 50x slower
os.environ.setdefault("OMP_NUM_THREADS", "1")

from precisionaudit.core.findings import PLAN_MIN_SEVERITY  # noqa: E402
from precisionaudit.core.target import Target  # noqa: E402
from precisionaudit.core.values import ValueOptions  # noqa: E402
from precisionaudit.plan.fp4 import keep_out  # noqa: E402
from precisionaudit.rules.engine import load_rules  # noqa: E402
from precisionaudit.runtime.sources import LoadOptions  # noqa: E402
from precisionaudit.frontend import frontend_for  # noqa: E402

#: published configs at full size: (transformers class, config values, input shape)
FULL = {
    "llama3_8b": ("LlamaForCausalLM", dict(model_type="llama", hidden_size=4096, intermediate_size=14336,
                                           num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                           vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
                                           tie_word_embeddings=False), "input_ids=1x64"),
    "qwen2_5_7b": ("Qwen2ForCausalLM", dict(model_type="qwen2", hidden_size=3584, intermediate_size=18944,
                                            num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                                            vocab_size=152064, max_position_embeddings=32768,
                                            tie_word_embeddings=False), "input_ids=1x64"),
    "mixtral_8x7b": ("MixtralForCausalLM", dict(model_type="mixtral", hidden_size=4096, intermediate_size=14336,
                                                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                                num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                                                max_position_embeddings=32768), "input_ids=1x64"),
    "vit_huge_14": ("ViTForImageClassification", dict(model_type="vit", hidden_size=1280, intermediate_size=5120,
                                                       num_hidden_layers=32, num_attention_heads=16, image_size=224,
                                                       patch_size=14, num_labels=1000), "pixel_values=1x3x224x224"),
    "mamba2_2_7b": ("Mamba2ForCausalLM", dict(model_type="mamba2", hidden_size=2560, num_hidden_layers=64,
                                              vocab_size=50288, state_size=128, expand=2, head_dim=64,
                                              num_heads=80, n_groups=1, conv_kernel=4, chunk_size=256,
                                              tie_word_embeddings=True), "input_ids=1x64"),
}
#: small published configs (and Mixtral's architecture reduced) for the measured part
SMALL = {
    "smollm2_135m": ("LlamaForCausalLM", dict(model_type="llama", hidden_size=576, intermediate_size=1536,
                                              num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                              vocab_size=49152, max_position_embeddings=8192,
                                              tie_word_embeddings=True), "input_ids=2x64"),
    "qwen2_5_0_5b": ("Qwen2ForCausalLM", dict(model_type="qwen2", hidden_size=896, intermediate_size=4864,
                                              num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                              vocab_size=151936, max_position_embeddings=32768,
                                              tie_word_embeddings=True), "input_ids=2x64"),
    "mixtral_reduced": ("MixtralForCausalLM", dict(model_type="mixtral", hidden_size=512, intermediate_size=1792,
                                                   num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                                                   num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                                                   max_position_embeddings=4096), "input_ids=2x64"),
    "vit_small_16": ("ViTForImageClassification", dict(model_type="vit", hidden_size=384, intermediate_size=1536,
                                                       num_hidden_layers=12, num_attention_heads=6, image_size=224,
                                                       patch_size=16, num_labels=1000), "pixel_values=1x3x224x224"),
    "mamba2_130m": ("Mamba2ForCausalLM", dict(model_type="mamba2", hidden_size=768, num_hidden_layers=24,
                                              vocab_size=50288, state_size=128, expand=2, head_dim=64,
                                              num_heads=24, n_groups=1, conv_kernel=4, chunk_size=256,
                                              tie_word_embeddings=True), "input_ids=2x64"),
}
FP4_RULES = {f"PA61{i}" for i in range(1, 8)}


def write_config(root: str, name: str, spec) -> str:
    cls, values, _ = spec
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump({"architectures": [cls], **values}, fh)
    return path


def _scan(path, fmt, shape, tp=1, values=ValueOptions()):
    rules = [r for r in load_rules() if r.id in FP4_RULES]
    started = time.perf_counter()
    result, found = frontend_for(path).scan(path, Target.named(fmt, tp=tp), rules,
                                            LoadOptions(input_shapes=(shape,)), 3600, values)
    if result.status != "ok":
        raise RuntimeError(result.error)
    return result, found, time.perf_counter() - started


def scan_row(path, fmt, shape, tp) -> dict:
    result, found, seconds = _scan(path, fmt, shape, tp)
    linears = {a["module"]: a["fp4"] for _, a in result.graph.nodes(data=True)
               if a.get("fp4") is not None and a["fp4"].convertible}
    keep = keep_out(found, result.graph, PLAN_MIN_SEVERITY)
    return {"linears": len(linears), "cannot": sorted({f.module for f in found if f.rule == "PA611" and
                                                       f.severity == "warning"}),
            "torchao_only": len({f.module for f in found if f.rule == "PA611" and f.severity == "info"
                                 and f.evidence.get("keep") is False}),
            "kept": len(keep.modules), "first": keep.first, "last": keep.last, "blocks": keep.blocks,
            "fp4_share": keep.fp4_share, "seconds": seconds}


def part_scan(root):
    print("## scan: published configs at full size (fake tensors; no weights)\n")
    print("| model | format | --tp | Linears | cannot run (PA611) | torchao NVFP4 training refuses | plan keeps in bf16 "
          "(first+last blocks) | Linear FLOPs in FP4 | scan s |")
    print("|---|---|---:|---:|---|---:|---|---:|---:|")
    for name, spec in FULL.items():
        path = write_config(root, name, spec)
        for fmt in ("nvfp4", "mxfp4"):
            for tp in (1, 8):
                try:
                    r = scan_row(path, fmt, spec[2], tp)
                except Exception as exc:  # noqa: BLE001 - a row that fails says why
                    print(f"| {name} | {fmt} | {tp} | error: {str(exc)[:200]} |", flush=True)
                    continue
                cannot = f"{len(r['cannot'])}: {', '.join(r['cannot'][:3])}{' ...' if len(r['cannot']) > 3 else ''}" \
                    if r["cannot"] else "0"
                print(f"| {name} | {fmt} | {tp} | {r['linears']} | {cannot} | {r['torchao_only'] if fmt == 'nvfp4' else '-'} "
                      f"| {r['kept']} ({r['first']}+{r['last']} of {r['blocks']}) | "
                      f"{100 * r['fp4_share']:.1f}% | {r['seconds']:.1f} |", flush=True)


def _sqnr_summary(graph) -> dict:
    parts = {"input": [], "weight": [], "gemm": [], "wgrad": []}
    seen = set()
    for _, a in graph.nodes(data=True):
        r = a.get("fp4_range")
        if r is None or a["module"] in seen:
            continue
        seen.add(a["module"])
        for p in parts:
            v = r.sqnr_db(p)
            if v is not None:
                parts[p].append((v, a["module"]))
    return parts


def part_measure(root, models):
    from precisionaudit.check.pytorch.runner import run_check
    from precisionaudit.plan.pytorch import make_plan
    from precisionaudit.plan.file import dump_plan

    print("\n## measure: small published configs, seeded weights, --data example\n")
    print("| model | format | Linears | median SQNR in/w/gemm/wgrad dB | worst Wgrad (dB, module) | measured past bound "
          "| plan keeps (first+last) | FLOPs in FP4 | output SNR as is -> planned (dB) | plan s | check s |")
    print("|---|---|---:|---|---|---:|---|---:|---|---:|---:|")
    for name in models:
        spec = SMALL[name]
        path = write_config(root, name, spec)
        for fmt in ("nvfp4", "mxfp4"):
            try:
                result, found, seconds = _scan(path, fmt, spec[2], values=ValueOptions(data="example"))
                plan, _ = make_plan(found, Target.named(fmt), result.graph)
                keep = keep_out(found, result.graph, PLAN_MIN_SEVERITY)
                plan_file = os.path.join(root, f"{name}_{fmt}.yaml")
                with open(plan_file, "w") as fh:
                    fh.write(dump_plan(plan))
                started = time.perf_counter()
                report = run_check(path, Target.named(fmt), plan=plan_file, load=LoadOptions(input_shapes=(spec[2],)))
                check_s = time.perf_counter() - started
            except Exception as exc:  # noqa: BLE001
                print(f"| {name} | {fmt} | error: {str(exc)[:300]} |", flush=True)
                continue
            parts = _sqnr_summary(result.graph)
            med = "/".join(f"{sorted(v)[len(v) // 2][0]:.1f}" if v else "-" for v in parts.values())
            worst = min(parts["wgrad"]) if parts["wgrad"] else None
            snr = {v["name"]: v["outputs"][0]["snr_db"] for v in report["variants"] if v.get("outputs")}
            print(f"| {name} | {fmt} | {len(parts['weight'])} | {med} | "
                  f"{'-' if worst is None else f'{worst[0]:.1f} {worst[1]}'} | {len(keep.failing)} | "
                  f"{len(keep.modules)} ({keep.first}+{keep.last}) | {100 * (keep.fp4_share or 0):.1f}% | "
                  f"{snr.get('baseline', float('nan')):.1f} -> {snr.get('planned', float('nan')):.1f} | "
                  f"{seconds:.0f} | {check_s:.0f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["scan", "measure", "train", "all"], default="all")
    parser.add_argument("--models", nargs="*", default=list(SMALL), help="measure: which small configs")
    parser.add_argument("--steps", type=int, default=300, help="train: optimizer steps")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        if args.part in ("scan", "all"):
            part_scan(root)
        if args.part in ("measure", "all"):
            part_measure(root, args.models)
    if args.part in ("train", "all"):
        from fp4_train import part_train

        part_train(args.steps)


if __name__ == "__main__":
    main()
