"""Findings → override plan: op-level entries, globs only where they are exact, determinism."""
import os
import textwrap

import yaml
from conftest import sample

from precisionaudit.core.findings import Finding
from precisionaudit.core.target import Target
from precisionaudit.ir.graph import OpNode, add_op, new_graph
from precisionaudit.plan.file import load_plan
from precisionaudit.plan.pytorch import make_plan
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan


def plan_for(path, mode="autocast", min_severity="warning"):
    target = Target("float16", mode, "cuda")
    results, findings = scan([path], target, load_rules())
    return make_plan(findings, target, results[0].graph, min_severity)


def entries(plan):
    return [(o.module, o.ops, o.rules) for o in plan.overrides]


def test_a_mask_repeated_in_every_layer_becomes_one_glob_entry():
    assert entries(plan_for(sample("check_mask_fill.py"))[0]) == [("blocks.*.attn", ["masked_fill"], ["PA107"])]


def test_a_hand_written_variance_plans_its_square_with_its_mean():
    (module, ops, rules), = entries(plan_for(sample("check_variance.py"))[0])
    assert module == "blocks.*.norm" and sorted(ops) == ["mean", "mul"] and rules == ["PA102"]


def test_a_clean_model_gets_an_empty_plan():
    assert plan_for(sample("check_clean.py"))[0].overrides == []


def test_min_severity_decides_which_findings_are_planned():
    default, _ = plan_for(sample("check_exp_overflow.py"), "pure")
    everything, _ = plan_for(sample("check_exp_overflow.py"), "pure", "info")
    assert entries(default) == [("gate", ["exp"], ["PA105"])]
    assert entries(everything) == [("gate", ["exp", "sum"], ["PA103", "PA105"])]


def test_findings_a_plan_cannot_fix_are_listed_as_notes():
    plan, notes = plan_for(sample("pa109_bce_hazard.py"))
    assert plan.overrides == [] and len(notes) == 1 and notes[0].startswith("PA109 binary_cross_entropy")


def test_pure_mode_names_the_modules_whose_parameters_stay_fp32(tmp_path):
    model = tmp_path / "tagger.py"
    model.write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(16, 16, batch_first=True)
                self.head = nn.Linear(16, 16)

            def forward(self, x):
                return self.head(self.rnn(x)[0])

        def get_model():
            return Tagger()

        def get_example_inputs():
            return (torch.randn(2, 8, 16),)
    """))
    plan, _ = plan_for(str(model), "pure")
    assert entries(plan) == [("rnn", ["lstm"], ["PA104"])] and plan.keep_fp32_modules == ["rnn"]


def _synthetic(flagged, layers=3):
    """A graph with blocks.N.attn modules each running a masked_fill; findings on ``flagged``."""
    graph = new_graph()
    findings = []
    for i in range(layers):
        name = add_op(graph, OpNode(name=f"masked_fill_{i}", op="masked_fill", target="aten.masked_fill",
                                    module=f"blocks.{i}.attn"))
        if i in flagged:
            findings.append(Finding(rule="PA107", name="unrepresentable-constant", severity="error",
                                    path="m.py", line=3, model="m.py:get_model", node=name,
                                    op="masked_fill", module=f"blocks.{i}.attn", message="-1e9",
                                    fix={"action": "keep_fp32", "ops": ["masked_fill"],
                                         "module": f"blocks.{i}.attn"}))
    return make_plan(findings, Target(), graph)[0]


def test_the_glob_is_used_only_when_it_matches_exactly_the_modules_that_need_the_fix():
    assert [o.module for o in _synthetic({0, 1, 2}).overrides] == ["blocks.*.attn"]
    assert [o.module for o in _synthetic({0, 2}).overrides] == ["blocks.0.attn", "blocks.2.attn"]


def test_layers_are_ordered_naturally():
    assert [o.module for o in _synthetic({2, 10}, layers=11).overrides] == ["blocks.2.attn", "blocks.10.attn"]


def test_plan_cli_writes_the_same_valid_yaml_twice_with_a_header(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    texts = []
    for _ in range(2):
        assert cli("plan", sample("check_mask_fill.py"), "-o", "amp_plan.yaml").exit_code == 0
        texts.append((tmp_path / "amp_plan.yaml").read_text())
    assert texts[0] == texts[1]
    assert texts[0].startswith("# precisionaudit override plan") and "apply_plan(model" in texts[0]
    assert yaml.safe_load(texts[0])["version"] == 1 and len(load_plan("amp_plan.yaml").overrides) == 1


def test_plan_cli_fails_with_one_line_on_a_missing_model(cli):
    result = cli("plan", "no_such_model.py")
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "no_such_model.py" in result.output


def test_plan_file_is_written_atomically(cli, tmp_path, monkeypatch):
    """A failed write leaves the previous plan as it was and no temporary file."""
    from precisionaudit.core import atomic

    out = tmp_path / "amp_plan.yaml"
    out.write_text("previous plan\n")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", full_disk)
    result = cli("plan", sample("pa107_mask_hazard.py"), "-o", out)
    assert result.exit_code == 2 and "cannot write plan: No space left on device" in result.stderr
    assert out.read_text() == "previous plan\n" and os.listdir(tmp_path) == ["amp_plan.yaml"]


def _model_file(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_an_attention_plans_its_logits_gemm_by_call_order_not_every_matmul(tmp_path):
    """GPT-2's eager attention: PA106 at q @ k^T. The module also runs probs @ v, which
    needs no fp32: the plan names the first matmul only (issue 36, the H200's 1.33x)."""
    path = _model_file(tmp_path, "attn.py", """
        import math
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(64, 192)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(64)
                return torch.softmax(scores, -1) @ v

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(Attention() for _ in range(2))

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x

        def get_model():
            return Model()

        def get_example_inputs():
            return (torch.randn(2, 8, 64),)
    """)
    assert entries(plan_for(path)[0]) == [("blocks.*", ["matmul#1"], ["PA106"])]


def test_a_log_of_a_saturated_sigmoid_plans_the_sigmoid_and_the_cancellation_too(tmp_path):
    """log(1 - sigmoid(x)) in fp16: sigmoid(9.4) is 1.0 and 1 - p is 0 before the log runs,
    so a plan that keeps only the log in fp32 still computes log(0)."""
    path = _model_file(tmp_path, "focal.py", """
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.cls = nn.Linear(8, 8)

            def forward(self, x):
                p = torch.sigmoid(self.cls(x))
                return torch.log(1 - p).sum()

        def get_model():
            return Head()

        def get_example_inputs():
            return (torch.randn(4, 8),)
    """)
    (module, ops, rules), = [e for e in entries(plan_for(path, "pure")[0]) if "PA105" in e[2]]
    assert module == "" and {"sigmoid", "sub", "log"} <= set(ops)


def test_a_finding_at_an_op_without_fix_ops_plans_that_op_not_its_whole_module():
    graph = new_graph()
    name = add_op(graph, OpNode(name="linear", op="linear", target="aten.addmm", module="head"))
    finding = Finding(rule="PA303", name="weight-out-of-range", severity="error", path="m.py", line=3,
                      model="m.py:get_model", node=name, op="linear", module="head", message="w",
                      fix={"action": "keep_fp32", "module": "head"})
    assert entries(make_plan([finding], Target(), graph)[0]) == [("head", ["linear"], ["PA303"])]


def test_a_finding_without_an_op_does_not_widen_a_region_whose_other_findings_name_ops():
    graph = new_graph()
    name = add_op(graph, OpNode(name="softmax", op="softmax", target="aten._softmax", module="attn"))
    named = Finding(rule="PA101", name="softmax", severity="error", path="m.py", line=3, model="m.py:get_model",
                    node=name, op="softmax", module="attn", message="s",
                    fix={"action": "keep_fp32", "ops": ["softmax"], "module": "attn"})
    unplaced = Finding(rule="PA303", name="weight-out-of-range", severity="error", path="m.py", line=None,
                       model="m.py:get_model", node=None, op=None, module="attn", message="w",
                       fix={"action": "keep_fp32", "module": "attn"})
    assert entries(make_plan([unplaced, named], Target(), graph)[0]) == [("attn", ["softmax"], ["PA101", "PA303"])]
    assert entries(make_plan([unplaced], Target(), graph)[0]) == [("attn", None, ["PA303"])]
