"""plan --prune for PyTorch models: only the entries the check's runs need, verified."""
import io
import json
import os

import pytest
from conftest import sample

from precisionaudit.check.pytorch.runner import run_check
from precisionaudit.core.target import Target
from precisionaudit.plan.file import load_plan
from precisionaudit.report.progress import progress_printer

DEMOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demos")


def demo(name):
    return os.path.join(DEMOS, name)


def header(plan_path) -> str:
    return "".join(line for line in open(plan_path) if line.startswith("#"))


def check_passes(cli, path, plan, *flags) -> bool:
    result = cli("check", path, *flags, "--plan", plan, "--format", "json")
    return json.loads(result.stdout)["passed"] and result.exit_code == 0


def test_prune_drops_the_region_the_inputs_do_not_need_and_the_result_passes(cli, tmp_path):
    path, static, pruned = demo("exp_gates.py"), tmp_path / "static.yaml", tmp_path / "pruned.yaml"
    assert cli("plan", path, "--mode", "pure", "-o", static).exit_code == 0
    result = cli("plan", path, "--mode", "pure", "--prune", "-o", pruned)
    assert result.exit_code == 0, result.output
    assert sorted(o.module for o in load_plan(str(static)).overrides) == ["cool", "hot"]
    assert [(o.module, o.ops) for o in load_plan(str(pruned)).overrides] == [("hot", ["exp"])]
    text = header(pruned)
    # reference, baseline, static plan, without hot (fails), without cool (passes)
    assert "5 model runs" in text and "keeps 1 of 2 entries" in text and "run passed" in text
    assert "dropped (the check passes without them on these inputs): cool [exp]" in text
    assert check_passes(cli, path, pruned, "--mode", "pure")


def test_prune_drops_single_ops_of_an_override(cli, tmp_path):
    """check_variance's static plan keeps mean and mul of each hand-written norm in fp32;
    the square alone is enough (its fp32 result keeps the mean after it in fp32)."""
    path, plan = sample("check_variance.py"), tmp_path / "pruned.yaml"
    assert cli("plan", path, "--prune", "-o", plan).exit_code == 0
    (entry,) = load_plan(str(plan)).overrides
    assert entry.module == "blocks.*.norm" and len(entry.ops) == 1
    assert "run passed" in header(plan) and check_passes(cli, path, plan)


def test_prune_keeps_nothing_when_the_baseline_passes(cli, tmp_path):
    path, plan = demo("exp_gates.py"), tmp_path / "pruned.yaml"
    result = cli("plan", path, "--mode", "pure", "--dtype", "bfloat16", "--prune", "-o", plan)
    assert result.exit_code == 0, result.output
    assert load_plan(str(plan)).overrides == []
    text = header(plan)
    assert "3 model runs" not in text and "2 model runs" in text and "baseline ok" in text


def test_prune_writes_the_static_plan_with_a_warning_when_no_plan_passes(cli, tmp_path):
    """exp of logits near 100 returned as the module's output: kept in fp32 it is finite, but
    the region hands it back in fp16, where it is inf: not even the static plan passes, and
    the search, which keeps the whole model in fp32 next and then (pure mode) its weights,
    says that neither can help."""
    model = tmp_path / "model.py"
    model.write_text(
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.proj = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n        return torch.exp(self.proj(x) * 40).float()\n"
        "def get_model():\n    return Net()\n"
        "def get_example_inputs():\n    return (torch.randn(4, 8),)\n")
    plan = tmp_path / "pruned.yaml"
    result = cli("plan", model, "--mode", "pure", "--prune", "-o", plan)
    assert result.exit_code == 0
    assert "no plan found passes the check" in result.stderr
    text = header(plan)
    assert "did NOT pass" in text and "keeps 1 of 1 entries" in text
    assert "tried, and not written since no plan passed (each the first divergence of a failing run, " \
           "kept in float32): <root> (whole); keep_fp32_modules <root>" in text
    assert "search stopped: the output of <root> still diverges (nonfinite) with the whole model in " \
           "float32 and float32 weights in <root> (keep_fp32_modules): no float32 region or weight fixes " \
           "this" in text
    assert [(o.module, o.ops) for o in load_plan(str(plan)).overrides] == [("", ["exp"])]


HAND_WRITTEN_ENERGY = """
import torch
from torch import nn

class Energy(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        with torch.no_grad():
            self.proj.weight.mul_(8)

    def forward(self, x):
        h = self.proj(x)
        e = h * h * 500.0            # no rule flags it; fp16 overflows where |h| > 11
        e = e / (e.amax(-1, keepdim=True) + 1)
        return self.out(e)

def get_model():
    torch.manual_seed(0)
    return Energy()

def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(4, 64),)
"""


def test_prune_grows_an_empty_plan_from_the_check_until_it_passes(cli, tmp_path):
    """No rule flags the hand-written energy, so the static plan is empty and the baseline
    fails: the first non-finite op is kept in fp32, the run passes, and pruning keeps it."""
    model, plan = tmp_path / "energy.py", tmp_path / "plan.yaml"
    model.write_text(HAND_WRITTEN_ENERGY)
    result = cli("plan", model, "--mode", "pure", "--prune", "-o", plan)
    assert result.exit_code == 0 and "no plan found" not in result.stderr
    assert [(o.module, o.ops) for o in load_plan(str(plan)).overrides] == [("", ["mul"])]
    text = header(plan)
    # reference, baseline, plus mul (passes), without mul (fails)
    assert "4 model runs" in text and "keeps 1 of 0 + 1 added entries" in text and "run passed" in text
    assert "added (each the first divergence of a failing run, kept in float32): mul in <root>" in text
    assert check_passes(cli, str(model), str(plan), "--mode", "pure")


def test_the_search_is_bounded(monkeypatch):
    from precisionaudit.plan.file import OverridePlan
    from precisionaudit.prune import pytorch as prune

    class Session:  # every run fails at a new op
        counts = {"forward": 1}
        target = Target("float16", "autocast")

        def variant(self, name, plan=None):
            self.counts["forward"] += 1
            n = len(plan.overrides) if plan else 0
            return {"status": "nonfinite", "error": None,
                    "first_divergence": {"module": "<root>", "op": f"op{n}", "kind": "nonfinite"}}

    monkeypatch.setattr(prune, "MAX_GROWTH", 3)
    pruned = prune.prune(OverridePlan(target={}), Session())
    assert not pruned.passed and pruned.added == ["op0 in <root>", "op1 in <root>", "op2 in <root>"]
    assert pruned.stuck == "still failing after 3 added regions (next: op3 in <root>)"
    assert pruned.runs == 5 and pruned.plan.overrides == []  # reference, baseline, 3 tries


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_goes_to_a_terminal_only():
    assert progress_printer(io.StringIO()) is None
    stream = Terminal()
    show = progress_printer(stream)
    show("baseline (float16, autocast)")
    assert stream.getvalue().startswith("precisionaudit: [") and "baseline (float16, autocast)" in stream.getvalue()


def test_check_reports_each_run_as_it_starts(tmp_path):
    seen = []
    run_check(sample("check_exp_overflow.py"), Target("float16", "pure", "cuda"), progress=seen.append)
    assert seen == ["loading the model", "reference (float32), batch 64x256",
                    "baseline (float16, pure), batch 64x256, run 2"]


def test_no_progress_when_stderr_is_no_terminal(cli):
    result = cli("check", sample("check_exp_overflow.py"), "--mode", "pure", "--format", "json")
    assert "reference (float32)" not in result.stderr and "[" not in result.stderr


def test_a_divergence_inside_an_fp32_region_widens_it_to_the_module_then_its_parents():
    """layernorm_eps: rsqrt of a variance plus an eps that rounds to 0 is the first non-finite
    op, but its cause is the add before it: the region widens to the norm module."""
    from precisionaudit.plan.file import Override, OverridePlan
    from precisionaudit.prune.pytorch import _next_region

    plan = OverridePlan(target={}, overrides=[Override("a.b", ["rsqrt"])])
    assert _next_region(plan, "a.b", "exp") == ("a.b", ["exp"])
    assert _next_region(plan, "a.b", "rsqrt") == ("a.b", None)
    plan.overrides.append(Override("a.b", None))
    assert _next_region(plan, "a.b", "rsqrt") == ("a", None)
    assert _next_region(plan, "a.b.c", None) == ("a", None)  # a.b encloses a.b.c
    plan.overrides.append(Override("", None))
    assert _next_region(plan, "x", "exp") is None


def test_the_search_finds_the_region_a_static_plan_would_from_an_empty_start(tmp_path):
    from precisionaudit.plan.file import OverridePlan
    from precisionaudit.prune.pytorch import pruned_plan

    pruned = pruned_plan(OverridePlan(target={}), demo("layernorm_eps.py"), Target("float16", "pure"), 0)
    assert pruned.passed and pruned.added == ["rsqrt in norm", "norm (whole)"]
    assert [(o.module, o.ops) for o in pruned.plan.overrides] == [("norm", None)]


WEIGHT_PAST_FP16 = """
import torch
from torch import nn

class Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.tensor(1.0e5))  # inf in fp16

    def forward(self, x):
        return x * self.gain

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.gain = Gain()

    def forward(self, x):
        return self.gain(self.proj(x) * 1e-4)

def get_model():
    torch.manual_seed(0)
    return Net()

def get_example_inputs():
    torch.manual_seed(1)
    return (torch.randn(4, 8),)
"""


def test_in_pure_mode_the_search_keeps_the_diverging_modules_weights_once_no_region_helps(cli, tmp_path):
    """A weight that fp16 cannot hold (1e5) is inf before any op runs: every float32 region,
    the whole model included, reads it as inf. Pure mode's search then keeps that module's
    weights in fp32, which passes."""
    model, plan = tmp_path / "gain.py", tmp_path / "plan.yaml"
    model.write_text(WEIGHT_PAST_FP16)
    result = cli("plan", model, "--mode", "pure", "--prune", "-o", plan)
    assert result.exit_code == 0 and "no plan found" not in result.stderr
    text = header(plan)
    assert "added (each the first divergence of a failing run, kept in float32): mul in gain; gain (whole); " \
           "<root> (whole); keep_fp32_modules gain" in text
    assert load_plan(str(plan)).keep_fp32_modules == ["gain"]
    assert check_passes(cli, str(model), str(plan), "--mode", "pure")


def test_the_weights_tried_go_from_the_diverging_module_outwards():
    from precisionaudit.plan.file import OverridePlan
    from precisionaudit.prune.pytorch import _next_weights

    assert _next_weights(OverridePlan(target={}), "blocks.3.attn") == "blocks.3.attn"
    plan = OverridePlan(target={}, keep_fp32_modules=["blocks.*.attn"])
    assert _next_weights(plan, "blocks.3.attn.q") == "blocks.3"  # attn keeps q's weights too
    assert _next_weights(plan, "blocks.3.mlp") == "blocks.3.mlp"
    assert _next_weights(OverridePlan(target={}, keep_fp32_modules=[""]), "blocks.3") is None
