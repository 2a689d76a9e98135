"""PA113: sin/cos phases made from values stored in fp16/bf16 (analysis/phases.py)."""
import json

import pytest
import torch
from conftest import findings_of, sample, scanned_graph

from precisionaudit.analysis.ranges import contraction
from precisionaudit.core.target import Target
from precisionaudit.plan.pytorch import make_plan
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

TARGETS = [("float16", "autocast"), ("bfloat16", "autocast"), ("float16", "pure"), ("bfloat16", "pure")]


def pa113(name, dtype, mode):
    return [f for f in findings_of(sample(name), dtype=dtype, mode=mode) if f.rule == "PA113"]


def line_of(name, text):
    with open(sample(name)) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


def test_fp16_phases_of_2048_exact_positions_are_reported_at_the_outer_product():
    """Positions up to 2047 are exact in fp16 (no PA110) but their product with the
    frequencies is stored in fp16: 2047 rad rounded to 2^-11 relative is an error up to 1 rad."""
    for mode in ("pure", "autocast"):
        (f,) = pa113("pa113_phase_hazard.py", "float16", mode)
        assert (f.line, f.op, f.fix["ops"]) == (line_of("pa113_phase_hazard.py", "torch.outer"), "outer", ["outer"])
        assert f.evidence["phase_max"] == 2047 and f.evidence["phase_error"] == pytest.approx(2047 * 2**-11)
        assert "PA110" not in {g.rule for g in findings_of(sample("pa113_phase_hazard.py"), mode=mode)}


def test_bf16_positions_are_reported_where_they_are_rounded():
    """In bf16 the positions themselves are rounded (past 256): the loss starts at the cast."""
    (f,) = pa113("pa113_phase_hazard.py", "bfloat16", "autocast")
    assert (f.line, f.op, f.fix["ops"]) == (line_of("pa113_phase_hazard.py", ".to(h.dtype)"), "to", ["to", "outer"])


@pytest.mark.parametrize("dtype,mode", TARGETS, ids="-".join)
def test_fp32_phases_are_clean(dtype, mode):
    assert pa113("pa113_phase_clean.py", dtype, mode) == []
    assert pa113("pa113_timestep_clean.py", dtype, mode) == []


def test_a_frequency_table_stored_in_fp16_is_not_a_phase_store():
    """``inv_freq.to(h.dtype)`` rounds each frequency once, the same for every position."""
    graph = scanned_graph(sample("pa113_phase_hazard.py"), mode="pure")
    stores = {a["op"] for _, a in graph.nodes(data=True) if "phase" in a}
    assert stores == {"outer"}


def test_a_bf16_timestep_scaled_by_1000_is_reported_at_the_cast():
    """Flux's ``timestep.to(hidden_states.dtype) * 1000``: t in [0, 1] is a model input of
    unknown range, taken as |t| <= 1; x1000 and frequencies up to 1 make phases up to 1000
    rad, rounded in bf16 by up to 1000 x 2^-8 = 3.9 rad."""
    (f,) = pa113("pa113_timestep_hazard.py", "bfloat16", "autocast")
    assert (f.line, f.op, f.module) == (line_of("pa113_timestep_hazard.py", "timestep = timestep.to("), "to", "")
    assert f.evidence["basis"] == "unit-scale inputs" and f.evidence["phase_max"] == pytest.approx(1000)
    assert f.evidence["phase_error"] == pytest.approx(1000 * 2**-8)
    assert f.fix["ops"] == ["to", "mul"]


def test_an_fp16_timestep_scaled_by_1000_is_below_the_unit_scale_threshold():
    """1000 < 2^10: a unit-scale t rounded in fp16 moves by under half a step after x1000."""
    assert pa113("pa113_timestep_hazard.py", "float16", "autocast") == []


def test_measured_timesteps_are_judged_at_the_finer_threshold(cli):
    """With --data the timestep's range is measured (t < 1, so phases under 1000 rad): no
    assumption is needed, and fp16's error of about 0.5 rad passes max_phase_error (0.01 rad)."""
    result = cli("scan", sample("pa113_timestep_hazard.py"), "--data", "example", "--select", "PA113",
                 "--format", "json")
    (f,) = json.loads(result.output)["findings"]
    assert f["evidence"]["basis"] != "unit-scale inputs" and 0.01 < f["evidence"]["phase_error"] < 1000 * 2**-11


def test_the_plan_keeps_the_timestep_cast_and_scale_in_fp32():
    target = Target("bfloat16", "autocast", "cuda")
    results, findings = scan([sample("pa113_timestep_hazard.py")], target, load_rules())
    plan, _ = make_plan(findings, target, results[0].graph)
    assert [(o.module, o.ops, o.rules) for o in plan.overrides] == [("", ["to", "mul"], ["PA113"])]


ROTARY = """
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d)
        self.register_buffer("inv_freq", inv_freq, persistent={persistent})

    def forward(self, x):
        h = self.proj(x)
        pos = torch.arange(x.shape[1], device=x.device).to(h.dtype)
        freqs = pos[:, None] * self.inv_freq[None, :]
        return h + torch.cat([freqs.sin(), freqs.cos()], dim=-1)


def get_model():
    return Rotary()


def get_example_inputs():
    return (torch.randn(1, 2048, 64),)
"""


def rotary_file(tmp_path, persistent):
    path = tmp_path / f"rotary_{persistent}.py"
    path.write_text(ROTARY.replace("{persistent}", str(persistent)))
    return str(path)


def test_a_non_persistent_frequency_buffer_bounds_the_phase(tmp_path):
    """HF-style ``register_buffer("inv_freq", ..., persistent=False)``: no checkpoint replaces
    it, so the values its constructor gave (up to 1) bound the phase, read through a view."""
    path = rotary_file(tmp_path, False)
    graph = scanned_graph(path, mode="pure")
    assert graph.graph["buffer_ranges"]["inv_freq"] == pytest.approx((10000 ** (-62 / 64), 1.0))
    mul = next(a for _, a in graph.nodes(data=True) if a["op"] == "mul")
    assert mul["range"].value_range == pytest.approx((0.0, 2047.0))
    (f,) = [f for f in findings_of(path, mode="pure") if f.rule == "PA113"]
    assert (f.op, f.evidence["phase_max"]) == ("mul", pytest.approx(2047.0))


def test_a_persistent_buffer_stays_unknown_to_the_range_pass_and_is_assumed_as_built_by_pa113(tmp_path):
    """A persistent buffer may come from a checkpoint: the range pass leaves it unknown (its
    view is still an operand of its own, so the product is not taken for ``pos * pos``). A
    frequency table a checkpoint stores is the one its constructor computes (GPT-NeoX saved
    its inv_freq), so PA113's bound takes it as built and says so in the message."""
    path = rotary_file(tmp_path, True)
    graph = scanned_graph(path, mode="pure")
    assert "inv_freq" not in graph.graph["buffer_ranges"]
    assert graph.graph["built_buffer_ranges"]["inv_freq"] == pytest.approx((10000 ** (-62 / 64), 1.0))
    mul = next(a for _, a in graph.nodes(data=True) if a["op"] == "mul")
    assert mul["range"].value_range is None
    (f,) = [f for f in findings_of(path, mode="pure") if f.rule == "PA113"]
    assert (f.op, f.evidence["phase_max"], f.evidence["basis"]) == ("mul", pytest.approx(2047.0), "buffers as built")
    assert f.evidence["assumed_buffers"] == ["inv_freq"]
    assert "the persistent buffer inv_freq taken at the values the model was built with" in f.message


ROTARY_BUFFER = "pa113_rotary_buffer_hazard.py"


def neox_phases(dtype):
    """GPT-NeoX's phases before PR #1041, by torch arithmetic: positions and inv_freq
    (head_dim 32, base 10000) in ``dtype``, their einsum in ``dtype``; and the fp32 reference."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32))
    t = torch.arange(2048).float()
    low = torch.einsum("i,j->ij", t.to(dtype), inv_freq.to(dtype)).double()
    return low, torch.outer(t, inv_freq).double()


@pytest.mark.parametrize("mode", ["pure", "autocast"])
def test_gpt_neox_fp16_rotary_from_a_persistent_inv_freq_is_reported_at_the_einsum(mode):
    """EleutherAI/gpt-neox #1003: under ``.half()`` the persistent inv_freq is fp16 and the
    positions take its dtype; under autocast einsum is an fp16 op and casts the fp32 ones.
    Either way the phase is stored in fp16. The bound, 2047 x 2^-11 rad, holds the real error
    (the fp16 phases against fp32 ones of the same, fp16-rounded, frequencies) and is within
    2x of it; against fp32 frequencies too the error is past 0.8 rad (cos off by 0.78)."""
    (f,) = pa113(ROTARY_BUFFER, "float16", mode)
    assert (f.line, f.op, f.module) == (line_of(ROTARY_BUFFER, "torch.einsum"), "einsum", "rotary")
    assert f.evidence["basis"] == "buffers as built" and f.evidence["assumed_buffers"] == ["rotary.inv_freq"]
    low, reference = neox_phases(torch.float16)
    assert f.evidence["phase_max"] == pytest.approx(reference.abs().max().item())
    inv_freq_fp16 = (1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32))).half().double()
    store_error = (low - torch.outer(torch.arange(2048).double(), inv_freq_fp16)).abs().max().item()
    assert store_error == 0.5  # phases in [1024, 2048) are 1 apart in fp16
    assert store_error <= f.evidence["phase_error"] <= 2 * store_error
    assert f.evidence["phase_error"] == pytest.approx(2047 * 2**-11)
    assert (low - reference).abs().max().item() > 0.8
    assert (low.float().cos() - reference.float().cos()).abs().max().item() > 0.75
    assert f.fix["ops"] == ["einsum", "cat"]


def test_gpt_neox_bf16_rotary_is_reported_where_the_positions_are_rounded():
    """Pure bf16: ``type_as`` rounds positions past 256 (PA110 too), then the einsum; the
    loss starts at the cast, and the real bf16 phase error (6.6 rad) is within the bound. The
    bound is of the stored positions: bf16 holds the largest, 2047, as 2048."""
    (f,) = pa113(ROTARY_BUFFER, "bfloat16", "pure")
    assert (f.line, f.op) == (line_of(ROTARY_BUFFER, ".type_as(self.inv_freq)"), "type_as")
    low, reference = neox_phases(torch.bfloat16)
    assert torch.tensor(2047.0).bfloat16().item() == 2048.0
    assert 1.0 < (low - reference).abs().max().item() <= f.evidence["phase_error"] == pytest.approx(2048 * 2**-8)


@pytest.mark.parametrize("dtype,mode", TARGETS, ids="-".join)
def test_fp32_rotary_phases_from_the_same_persistent_buffer_are_clean(dtype, mode):
    """The fixed twin reads the same persistent (so equally assumed) buffer, as ``.float()``
    with autocast off: the phase is fp32 in every target."""
    assert pa113("pa113_rotary_buffer_clean.py", dtype, mode) == []


def test_einsum_i_j_to_ij_is_an_outer_product_on_the_phase_chain():
    """It runs as one broadcast mul (no sum): the range pass multiplies its operands' ranges."""
    graph = scanned_graph(sample("pa113_rotary_buffer_clean.py"), mode="pure")
    einsum = next(a for _, a in graph.nodes(data=True) if a["op"] == "einsum")
    assert contraction(einsum) == 1 and einsum["out_dtype"] == "float32"


def test_the_timestep_plan_passes_the_check_the_baseline_fails(cli, tmp_path):
    """bf16 autocast, CPU-emulated: the rounded timestep moves the embedding's cos by a third
    (its relative error), beyond tolerance; with the plan's fp32 cast and scale it passes."""
    path, plan = sample("pa113_timestep_hazard.py"), tmp_path / "amp_plan.yaml"
    assert cli("plan", path, "--dtype", "bfloat16", "-o", plan).exit_code == 0
    result = cli("check", path, "--dtype", "bfloat16", "--plan", plan, "--format", "json")
    baseline, planned = json.loads(result.stdout)["variants"][1:]
    assert baseline["status"] == "exceeds_tolerance" and baseline["first_divergence"]["op"] in ("cos", "sin")
    assert planned["status"] == "ok" and result.exit_code == 0
