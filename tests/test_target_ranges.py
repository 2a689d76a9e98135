"""The range pass measures the program that runs under the target (issue 25, part 1).

Code that branches on the dtype runs another program in fp32 than in fp16: the fp32
reference alone gives a false PA301 error on a model that picks fp16-safe values, and misses
a value that exists only in the fp16 program (OPT's finfo(fp16).min mask rounding to -inf).
"""
import json

import pytest
from click.testing import CliRunner
from conftest import sample

from precisionaudit.cli import main
from precisionaudit.core.values import matched_calls
from precisionaudit.runtime.sources import DEFAULT_LOAD

MODES = ["autocast", "pure"]


def _pa301(path, mode, *extra):
    result = CliRunner().invoke(main, ["scan", path, "--data", "example", "--mode", mode,
                                       "--format", "json", "--select", "PA301", *extra])
    report = json.loads(result.stdout)
    assert report["models"][0]["status"] == "ok", report
    return result.exit_code, report["findings"]


@pytest.mark.parametrize("mode", MODES)
def test_a_model_that_picks_fp16_safe_values_on_the_dtype_is_silent(mode):
    """-1e30 exists only in the fp32 program: the fp16 program masks with -1e4 (check passes)."""
    assert _pa301(sample("pa301_dtype_branch_clean.py"), mode) == (0, [])


@pytest.mark.parametrize("mode", MODES)
def test_a_mask_that_rounds_to_inf_only_in_fp16_is_caught_at_the_add(mode):
    code, findings = _pa301(sample("pa301_padded_row_hazard.py"), mode)
    assert code == 1 and len(findings) == 1, findings
    f = findings[0]
    assert f["severity"] == "error" and f["op"] == "add" and f["module"] == "attn"
    assert "-inf in the float16 run" in f["message"]
    assert "softmax" in f["message"] and "NaN" in f["message"]
    assert f["evidence"]["run"] == "float16" and f["evidence"]["nan_at"]


@pytest.mark.parametrize("mode", MODES)
def test_the_bounded_mask_of_the_fix_is_silent(mode):
    """The add still rounds to -inf in fp16; torch.max brings it back before the softmax."""
    assert _pa301(sample("pa301_padded_row_clean.py"), mode) == (0, [])


def test_an_overflow_the_fp16_program_has_names_the_fp32_reference():
    """T5's wo: the reference's 1e5 is the headroom (the fp16 run only knows inf)."""
    from safetensors.torch import save_file

    from precisionaudit.runtime.pytorch.model_file import import_model_file
    import tempfile, os

    path = sample("pa301_t5_ff_hazard.py")
    with tempfile.TemporaryDirectory(prefix="targetrange") as tmp:
        weights = os.path.join(tmp, "w.safetensors")
        save_file(import_model_file(path).trained_state_dict(), weights)
        code, findings = _pa301(path, "autocast", "--weights", weights)
    assert code == 1 and findings[0]["module"] == "block.ff.wo"
    assert "in the fp32 reference" in findings[0]["message"]
    assert findings[0]["evidence"]["run"] == "float32"


def _nodes(path, mode):
    from precisionaudit.analysis import run_passes
    from precisionaudit.core.target import Target
    from precisionaudit.core.values import ValueOptions
    from precisionaudit.frontend import frontend_for

    target = Target("float16", mode, "cuda")
    frontend = frontend_for(path)
    captured = frontend.capture(path, target, DEFAULT_LOAD)
    frontend.measure(captured.graph, path, target, DEFAULT_LOAD, ValueOptions(data="example"))
    return [attrs for _, attrs in run_passes(captured.graph).nodes(data=True)]


def test_every_ir_node_gets_the_target_runs_statistics_of_its_own_call():
    """The capture follows the target's control flow, as the target run does: the keys match."""
    nodes = _nodes(sample("pa301_dtype_branch_clean.py"), "pure")
    assert all(n.get("calibration") and n["calibration"].target for n in nodes)
    masked = next(n for n in nodes if n["op"] == "masked_fill")["calibration"]
    assert masked.target["lo"] == -1e4 and masked.stats["lo"] == pytest.approx(-1e30)


def test_a_call_only_the_fp16_program_makes_gets_no_fp32_statistics():
    """The clamp runs only under fp16: no reference value is attributed to it (nor shifted
    onto another node), and the range pass reads the run that made it."""
    nodes = _nodes(sample("pa301_dtype_branch_clean.py"), "pure")
    clamp = next(n for n in nodes if n["op"] == "clamp")["calibration"]
    assert clamp.stats is None and clamp.target["max_abs"] < 100
    assert clamp.interval() == (clamp.target["lo"], clamp.target["hi"])


def test_the_masked_logits_interval_is_the_fp16_programs():
    nodes = _nodes(sample("pa301_dtype_branch_clean.py"), "autocast")
    masked = next(n for n in nodes if n["op"] == "masked_fill")
    assert masked["range"].value_range[0] == -1e4


@pytest.mark.parametrize("reference, target, expected", [
    (["m|a|0", "m|b|0"], ["m|a|0", "m|b|0"], {"m|a|0": "m|a|0", "m|b|0": "m|b|0"}),
    # a clamp only the target makes: the reference's later clamp is the target's second one
    (["m|a|0", "m|b|0", "m|clamp|0"], ["m|a|0", "m|clamp|0", "m|b|0", "m|clamp|1"],
     {"m|a|0": "m|a|0", "m|b|0": "m|b|0", "m|clamp|1": "m|clamp|0"}),
    # a call only the reference makes (a cast that is a no-op in fp16) is attributed nowhere
    (["m|to|0", "m|add|0"], ["m|add|0"], {"m|add|0": "m|add|0"}),
    (["x|a|0"], ["y|a|0"], {}),
])
def test_matched_calls_pairs_only_the_same_call_in_both_runs(reference, target, expected):
    assert matched_calls(reference, target) == expected


def test_the_plan_keeps_the_add_and_the_softmax_and_check_proves_it(cli, tmp_path):
    from precisionaudit.plan.file import load_plan

    path, plan = sample("pa301_padded_row_hazard.py"), tmp_path / "plan.yaml"
    assert cli("plan", path, "--data", "example", "-o", plan).exit_code == 0
    assert [(o.module, o.ops) for o in load_plan(str(plan)).overrides] == [("attn", ["add", "softmax"])]
    before = json.loads(cli("check", path, "--data", "example", "--format", "json").stdout)
    assert before["variants"][1]["status"] == "nonfinite"
    after = json.loads(cli("check", path, "--data", "example", "--plan", plan, "--format", "json").stdout)
    assert after["passed"] is True and after["variants"][2]["status"] == "ok", after


@pytest.mark.parametrize("mode", MODES)
def test_the_fixed_opt_attention_is_no_headroom_warning(mode):
    """OPT after transformers PR #17437: scores + the finfo(fp16).min mask come within 2x of
    65504 (the issue's 6.547e+04), but the next op, torch.max(attn_weights, finfo.min),
    brings any sum back into fp16's range, and the mask's own -65504 is a constant the model
    wrote: no value there can grow past the range."""
    assert _pa301(sample("pa301_opt_clamped_clean.py"), mode) == (0, [])


def test_the_same_sum_without_the_bound_is_still_a_headroom_warning():
    """The twin without torch.max: a score below -16 makes the masked sum -inf in fp16, and a
    fully masked row (the first query of the left-padded sequence) NaN after the softmax."""
    code, findings = _pa301(sample("pa301_opt_clamped_hazard.py"), "pure", "--fail-on", "warning")
    assert code == 1 and len(findings) == 1, findings
    f = findings[0]
    assert (f["severity"], f["op"], f["module"]) == ("warning", "add", "attn")
    assert 65504 / 2 <= f["evidence"]["measured"] <= 65504 and "within the 2x headroom" in f["message"]
