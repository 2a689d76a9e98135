"""The FP4 targets (--dtype nvfp4|mxfp4): bf16 autocast plus FP4 Linears, the eligibility pass
(analysis/fp4.py, with --tp's Megatron-style splits) and its static rules PA611-PA612."""
import json

import pytest
from click.testing import CliRunner
from conftest import ROOT, sample

from precisionaudit.cli import main
from precisionaudit.core.target import Target
from precisionaudit.rules.checks.fp4_gemms import block_ranges, recipe_blocks
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

NVFP4 = Target.named("nvfp4")
STATIC = [
    ("PA611", "pa611_fp4_dims_hazard.py", "pa611_fp4_dims_clean.py"),
    ("PA612", "pa612_fp4_head_hazard.py", "pa612_fp4_head_clean.py"),
]


def _scan(name, target=NVFP4, select=None):
    rules = [r for r in load_rules() if select is None or r.id in select]
    results, found = scan([name if "/" in name else sample(name)], target, rules)
    assert results[0].status == "ok", results[0].error
    return results[0], found


def _fp4_facts(name, target=NVFP4):
    result, _ = _scan(name, target, select=())
    return {a["module"]: a["fp4"] for _, a in result.graph.nodes(data=True) if "fp4" in a}


def test_fp4_targets_are_bf16_autocast_named_by_their_format():
    assert NVFP4 == Target("bfloat16", "autocast", "cuda", "nvfp4")
    assert NVFP4.as_dict() == {"dtype": "nvfp4", "mode": "autocast", "device": "cuda"}
    assert Target.named("mxfp4", tp=4).as_dict() == {"dtype": "mxfp4", "mode": "autocast", "device": "cuda", "tp": 4}
    assert (NVFP4.fp4, NVFP4.fp8_recipe, NVFP4.named_dtype) == ("nvfp4", None, "nvfp4")
    assert Target.named("float8").fp4 is None and Target.named("float8").as_dict()["dtype"] == "float8"
    with pytest.raises(ValueError, match="no --mode pure"):
        Target.named("nvfp4", mode="pure")
    with pytest.raises(ValueError, match="is an FP8 recipe"):
        Target.named("mxfp4", recipe="mxfp8")
    with pytest.raises(ValueError, match="needs --dtype float8, nvfp4 or mxfp4"):
        Target.named("bfloat16", tp=2)


@pytest.mark.parametrize("rule,hazard,clean", STATIC, ids=[c[0] for c in STATIC])
def test_hazard_fires_under_fp4_only_and_the_clean_twin_is_silent(rule, hazard, clean):
    _, found = _scan(hazard)
    hits = [f for f in found if f.rule == rule]
    assert hits and any(f.severity == "warning" for f in hits)
    for f in hits:  # strict templates: every placeholder filled with a real value
        assert "{" not in f.message + " ".join(str(v) for v in f.fix.values())
    assert rule not in {f.rule for f in _scan(hazard, Target.named("bfloat16"))[1]}
    assert rule not in {f.rule for f in _scan(hazard, Target.named("float8"))[1]}
    assert rule not in {f.rule for f in _scan(clean)[1]}
    assert rule not in {f.rule for f in _scan(clean, Target.named("mxfp4"))[1]}


def test_an_unaligned_mlp_falls_back_to_bf16_with_the_padded_size():
    facts = _fp4_facts("pa611_fp4_dims_hazard.py")
    up = facts["block.up"]
    assert (up.runs_fp4, up.k, up.n, up.padded_n, up.multiple) == (False, 256, 1032, 1040, 16)
    assert "NVFP4 GEMMs need both divisible by 16" in up.fallback
    mx = _fp4_facts("pa611_fp4_dims_clean.py", Target.named("mxfp4"))["block.up"]
    assert mx.runs_fp4 and mx.multiple == 32 and mx.torchao_training is None


def test_torchao_training_needs_128_and_says_so_as_info():
    """d=128, ff=512: every dim a multiple of 128, silent; under --tp 8 the MLP's split dim is
    512/8 = 64 per rank: TE runs it (a multiple of 16), torchao's NVFP4 training does not (info);
    the head's vocabulary is padded to 1024 = 128 * 8, so 128 per rank."""
    assert not _scan("pa612_fp4_head_hazard.py", select={"PA611"})[1]
    _, found = _scan("pa612_fp4_head_hazard.py", Target.named("nvfp4", tp=8), select={"PA611"})
    assert found and {f.severity for f in found} == {"info"}
    assert all("divisible by 128" in f.message and "--tp 8" in f.message for f in found)
    assert {f.module.rpartition(".")[2] for f in found} == {"up", "down"}


def test_the_head_and_the_recipes_last_blocks_are_named():
    _, found = _scan("pa612_fp4_head_hazard.py", select={"PA612"})
    head, blocks = sorted(found, key=lambda f: f.severity != "warning")
    assert (head.severity, head.module) == ("warning", "lm_head")
    assert (blocks.severity, blocks.module) == ("info", "layers")
    assert blocks.evidence["first"] == 0 and blocks.evidence["last"] == 1
    assert "block 7 of the 8" in blocks.message and "12.5%" in blocks.message
    assert "--num-layers-at-end-in-bf16 1" in blocks.fix["to"]


def test_recipe_blocks_are_the_12b_runs_shares():
    assert recipe_blocks(62, 0.032, 0.129) == (2, 8)  # the 12B model: first 2, last 8
    assert recipe_blocks(32, 0.032, 0.129) == (1, 4)
    assert recipe_blocks(8, 0.032, 0.129) == (0, 1)
    assert recipe_blocks(2, 0.5, 0.5) == (0, 1)  # never the whole stack
    assert block_ranges([0, 28, 29, 30, 31]) == "0, 28-31"


@pytest.mark.parametrize("path,expect", [
    ("tests/hf_models/llama_tiny.py", {"q_proj": "column", "k_proj": "column", "v_proj": "column",
                                        "o_proj": "row", "gate_proj": "column", "up_proj": "column",
                                        "down_proj": "row", "lm_head": "column"}),
    ("tests/hf_models/bert_tiny.py", {"query": "column", "attention.output.dense": "row",
                                       "intermediate.dense": "column", "layer.0.output.dense": "row",
                                       "transform.dense": "replicated", "decoder": "column"}),
])
def test_megatron_splits_are_read_from_the_graph(path, expect):
    """Column-parallel: the output reaches a GEMM first (rotary's adds of q's halves are no
    residual join); row-parallel: it is added back into the stream first."""
    facts = _fp4_facts(f"{ROOT}/{path}", Target.named("nvfp4", tp=2))
    for suffix, split in expect.items():
        module = next(m for m in facts if m.endswith(suffix) and ".1." not in m)
        assert facts[module].split == split, module


def test_tp_divides_the_split_dim_and_pads_the_vocabulary():
    facts = _fp4_facts(f"{ROOT}/tests/hf_models/llama_tiny.py", Target.named("nvfp4", tp=2))
    o_proj = facts["model.layers.0.self_attn.o_proj"]
    assert (o_proj.full_k, o_proj.k, o_proj.n) == (64, 32, 64)
    head = facts["lm_head"]  # 32000 padded to a multiple of 128 * 2, halved
    assert (head.full_n, head.n) == (32000, 16000)


def test_bad_fp4_flags_are_one_line_and_exit_2():
    runner = CliRunner()
    model = sample("pa612_fp4_head_hazard.py")
    for args, words in [(["--dtype", "nvfp4", "--tp", "3"], "--tp 3 does not divide layers.0.up's N (out_features) 512"),
                        (["--dtype", "nvfp4", "--mode", "pure"], "takes no --mode pure"),
                        (["--dtype", "mxfp4", "--recipe", "rowwise"], "is an FP8 recipe"),
                        (["--tp", "2"], "needs --dtype float8, nvfp4 or mxfp4")]:
        result = runner.invoke(main, ["scan", model, *args])
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output and result.output.count("\n") == 1, result.output


def test_the_json_target_names_the_format_and_the_degree():
    result = CliRunner().invoke(main, ["scan", sample("pa611_fp4_dims_clean.py"), "--dtype", "mxfp4", "--tp", "2",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"] == {"dtype": "mxfp4", "mode": "autocast", "device": "cuda", "tp": 2}


def test_tp_judges_fp8_linears_per_rank_too():
    """The 8 blocks' MLP width 512 runs in FP8 on one GPU; on each of 64 ranks it is 8, off 16
    (up: N, column-parallel; down: K, row-parallel). A model without a stack of blocks is not
    split (its Linears are replicated)."""
    model = "pa612_fp4_head_hazard.py"
    assert not _scan(model, Target.named("float8"), select={"PA601"})[1]
    found = _scan(model, Target.named("float8", tp=64), select={"PA601"})[1]
    assert {f.module.rpartition(".")[2] for f in found} == {"up", "down"} and len(found) == 16
    assert all("one rank's of --tp 64" in f.message for f in found)
    assert not _scan("pa601_fp8_dims_clean.py", Target.named("float8", tp=2), select={"PA601"})[1]


def test_explain_shows_each_linears_rank_shape_split_and_block():
    result = CliRunner().invoke(main, ["explain", sample("pa612_fp4_head_hazard.py"), "--dtype", "nvfp4", "--tp", "2"])
    assert result.exit_code == 0, result.output
    table = result.output.split("NVFP4 GEMMs, per Linear GEMM")[1]
    up = next(line for line in table.splitlines() if " layers.7.up " in line)
    assert "256x128" in up and "column" in up and "7/8" in up and "NVFP4" in up
    head = next(line for line in table.splitlines() if " lm_head " in line)
    assert "output head" in head
