"""The measured FP8 range rules (PA604, PA605): the recipes' scales and the E4M3 error counts of
the range pass (capture/pytorch/fp8_ranges.py), the facts on the nodes, the rules on their
samples with --data example, and the plan that keeps the flagged Linears out of FP8."""
import math

import pytest
import torch
from click.testing import CliRunner
from conftest import sample

from precisionaudit.analysis.facts import Fp8RangeFacts
from precisionaudit.capture.pytorch import fp8_ranges
from precisionaudit.cli import main
from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.plan.pytorch import make_plan
from precisionaudit.runtime.pytorch.fp8 import quantize_dequantize
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

FP8 = Target.named("float8")
DATA = ValueOptions(data="example")
CASES = {"PA604": ("pa604_fp8_underflow_hazard.py", "pa604_fp8_underflow_clean.py", "proj"),
         "PA605": ("pa605_fp8_outlier_channel_hazard.py", "pa605_fp8_outlier_channel_clean.py", "block.up")}
LEVEL = {lvl: i for i, lvl in enumerate(fp8_ranges.LEVELS)}


def _scan(name, target=FP8, values=DATA):
    rules = [r for r in load_rules() if r.id in ("PA604", "PA605")]
    results, found = scan([sample(name)], target, rules, values=values)
    assert results[0].status == "ok", results[0].error
    return results[0], found


@pytest.fixture(scope="module")
def scanned():
    """Each sample scanned once under float8 with --data example."""
    return {name: _scan(name) for hazard, clean, _ in CASES.values() for name in (hazard, clean)}


# --------------------------------------------------------------------------- the round trips
def test_the_round_trip_is_the_checks_own_quantization():
    """The range pass counts the error of the quantization ``check --dtype float8`` computes
    its GEMMs with (tests/test_check_fp8*.py check that one against the recipes and torchao)."""
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1)) * torch.logspace(-2, 2, 64)
    x[3, 5] = 3e4
    for scheme in fp8_ranges.SCHEMES:
        assert torch.equal(fp8_ranges.round_trip(x, scheme), quantize_dequantize(x, scheme)), scheme
    assert fp8_ranges.round_trip(torch.ones(2, 48), "mxfp8") is None  # K not a multiple of 32


def test_a_tiny_row_flushes_to_zero_under_one_tensor_scale_and_survives_its_own_row_scale():
    # row 0: 448 then 1.0s (exact in E4M3 at scale 1); row 1: 2^-11 everywhere, which the
    # tensorwise scale 448/448 = 1 leaves at or below 2^-10, so E4M3 stores 0 (error 100%)
    x = torch.cat([torch.tensor([[448.0] + [1.0] * 31]), torch.full((1, 32), 2.0 ** -11)])
    c = fp8_ranges.input_counts(x)
    assert c["rows"] == 2 and c["nonzero"] == 64
    assert c["flushed"]["tensorwise"] == 32
    assert c["rows_above"]["tensorwise"][LEVEL[1.0]] == 1  # exactly the tiny row, at 100% error
    assert c["rows_above"]["tensorwise"][LEVEL[2.0 ** -6]] == 1  # row 0 is exact
    # its own row's scale: 448 * 2^11 rounded down is 2^19 (RCEIL: 2^-ceil(-19.8), the same),
    # and 2^-11 * 2^19 = 256 is exact
    for scheme in ("rowwise", "mxfp8"):
        assert c["flushed"][scheme] == 0
        assert c["rows_above"][scheme][0] == 0, scheme


def test_a_channel_in_every_token_crushes_the_others_under_tensorwise_and_rowwise_not_mxfp8():
    # column 0 is 2^20 in every row: 448 / 2^20 takes the 1.0s of its row and its 32-block
    # below 2^-10 (to 0); the second 32-block has its own MX scale and stays exact
    x = torch.ones(4, 64)
    x[:, 0] = 2.0 ** 20
    facts = Fp8RangeFacts("tensorwise", "tensorwise", 1, fp8_ranges.LEVELS,
                          fp8_ranges.as_record(fp8_ranges.input_counts(x), None, 1)["input"], None)
    assert facts.outlier_channels(100) == ([0], 1.0)
    for scheme in ("tensorwise", "rowwise"):
        assert facts.channel_errors(scheme, without=(0,)) == [1.0] * 63
    mx = facts.channel_errors("mxfp8", without=(0,))
    assert mx[:31] == [1.0] * 31 and mx[31:] == [0.0] * 32


def test_a_gaussian_tensor_stays_within_e4m3s_own_rounding_under_every_recipe():
    """The doc's claim: without outliers the channels' error is E4M3's (about 2.6%, under its
    2^-4 bound) and no row reaches 2^-3."""
    x = torch.randn(256, 1024, generator=torch.Generator().manual_seed(0))
    c = fp8_ranges.input_counts(x)
    for scheme in fp8_ranges.SCHEMES:
        errors = sorted(math.sqrt(e / q) for e, q in zip(c["error_sq"][scheme].tolist(), c["sq"].tolist()))
        assert 0.02 < errors[len(errors) // 2] < 2.0 ** -4, scheme
        assert c["rows_above"][scheme][LEVEL[2.0 ** -3]] == 0


@pytest.mark.parametrize("ratio,low,high", [(1e3, 0.02, 2.0 ** -4), (1e4, 0.035, 2.0 ** -4), (1e5, 0.3, 0.6)])
def test_e4m3_holds_the_other_channels_up_to_a_ratio_of_about_1e4_under_tensorwise(ratio, low, high):
    """PA605's doc: the other channels' median error is 2.6% at 10^3, 4.6% at 10^4, 45% at 10^5."""
    x = torch.randn(256, 1024, generator=torch.Generator().manual_seed(3))
    x[:, 7] *= ratio
    facts = Fp8RangeFacts("tensorwise", "tensorwise", 1, fp8_ranges.LEVELS,
                          fp8_ranges.as_record(fp8_ranges.input_counts(x), None, 1)["input"], None)
    errors = sorted(facts.channel_errors(without=(7,)))
    assert low < errors[(len(errors) - 1) // 2] < high
    mx = sorted(facts.channel_errors("mxfp8", without=(7,)))
    assert mx[(len(mx) - 1) // 2] < 2.0 ** -4  # the other 31 blocks keep their own scales


def test_counts_merge_over_calls():
    counts = fp8_ranges.LinearCounts(torch.nn.Sequential(torch.nn.Linear(32, 32)))
    with counts.counting():
        counts.model(torch.ones(3, 32))
    with counts.counting():
        counts.model(torch.full((2, 32), 4.0))
    counts.model(torch.ones(5, 32))  # outside counting(): not counted
    record = counts.records()["0"]
    assert record["calls"] == 2 and record["input"]["rows"] == 5 and record["input"]["amax"] == [4.0] * 32
    assert record["weight"]["rows"] == 32


# --------------------------------------------------------------------------- the rules
@pytest.mark.parametrize("rule", sorted(CASES))
def test_hazard_warns_with_filled_templates_and_the_clean_twin_is_silent(rule, scanned):
    hazard, clean, module = CASES[rule]
    hits = [f for f in scanned[hazard][1] if f.rule == rule]
    assert [(f.module, f.severity) for f in hits] == [(module, "warning")]
    for f in hits:  # strict templates: every placeholder filled with a real value
        assert "{" not in f.message + " ".join(str(v) for v in f.fix.values())
    assert [f.rule for f in scanned[clean][1]] == []


def test_pa604_names_the_rows_and_the_recipe_that_keeps_them(scanned):
    (f,) = [f for f in scanned["pa604_fp8_underflow_hazard.py"][1] if f.rule == "PA604"]
    assert "input's token rows" in f.message and "rowwise 0%" in f.message
    assert "--recipe rowwise" in f.fix["to"]
    facts = scanned["pa604_fp8_underflow_hazard.py"][0].graph
    (proj,) = [a["fp8_range"] for _, a in facts.nodes(data=True) if a.get("module") == "proj"]
    # 64 tokens at 10^-2.5 .. 10^2.5: under one scale the smallest ones lose their bits
    assert proj.rows_share(2.0 ** -3) > 0.05 and proj.rows_share(2.0 ** -3, scheme="rowwise") == 0


def test_pa605_says_rowwise_does_not_keep_an_every_token_channel_and_mxfp8_does(scanned):
    (f,) = [f for f in scanned["pa605_fp8_outlier_channel_hazard.py"][1] if f.rule == "PA605"]
    assert "input channel 7 " in f.message and "--recipe mxfp8 keeps them" in f.message
    assert "rowwise or" not in f.message and "sqrt(" in f.fix["to"]


def test_nothing_without_data_or_without_an_fp8_target():
    hazard = CASES["PA605"][0]
    assert _scan(hazard, values=ValueOptions())[1] == []
    result, found = _scan(hazard, target=Target.named("bfloat16"))
    assert found == [] and not any("fp8_range" in a for _, a in result.graph.nodes(data=True))


def test_delayed_is_judged_with_the_tensorwise_scale():
    result, found = _scan(CASES["PA605"][0], target=Target.named("float8", recipe="delayed"))
    (f,) = [f for f in found if f.rule == "PA605"]
    assert "--recipe delayed" in f.message and "tensorwise" in f.message
    (up,) = [a["fp8_range"] for _, a in result.graph.nodes(data=True) if a.get("module") == "block.up"]
    assert up.scheme == "tensorwise"


# --------------------------------------------------------------------------- the plan
def test_plan_keeps_the_flagged_linear_out_of_fp8_and_not_the_clean_twins(scanned, tmp_path):
    out = tmp_path / "plan.yaml"
    run = CliRunner().invoke(main, ["plan", sample(CASES["PA605"][0]), "--dtype", "float8", "--data", "example",
                                    "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "keep_out_of_fp8: [block.up]" in out.read_text()
    for rule, (hazard, clean, module) in CASES.items():
        result, found = scanned[hazard]
        assert make_plan(found, FP8, result.graph)[0].keep_out_of_fp8 == [module]
        result, found = scanned[clean]
        assert make_plan(found, FP8, result.graph)[0].keep_out_of_fp8 == []


def test_a_non_contiguous_input_is_counted_as_its_contiguous_copy():
    y = torch.randn(64, 64, generator=torch.Generator().manual_seed(1)).t()  # a transposed weight or input
    strided, copy = fp8_ranges.input_counts(y), fp8_ranges.input_counts(y.contiguous())
    assert set(strided["rows_above"]) == set(fp8_ranges.SCHEMES)
    assert strided["rows_above"] == copy["rows_above"] and strided["flushed"] == copy["flushed"]
