"""The rules package's structure: checks register in a leaf registry (no import cycle with
the engine), one module per rule; a rule pack's Python check registers through the public
``precisionaudit.rules.checks.check``, reads its thresholds with ``param`` and returns a
Hit; a bundled rule's message names only values that something supplies."""
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import sample, scanned_graph

from precisionaudit.core.target import Target
from precisionaudit.rules.engine import TemplateError, load_rules, run_rules
from precisionaudit.scanner import scan

TESTS = os.path.dirname(os.path.abspath(__file__))
HAZARD = os.path.join(TESTS, "models", "ex101_sigmoid_hazard.py")


def test_the_checks_import_without_the_engine():
    code = "import sys, precisionaudit.rules.checks; print('precisionaudit.rules.engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


PACK_RULE = """\
id: EX201
name: gate-sigmoid
summary: a sigmoid in a module deeper than a threshold
severity: info
check: ex201_gate_sigmoid
params: {min_width: 16}
match: {ops: [sigmoid]}
message: "{op} on {width} features (at least {min_width})"
doc: {what: An example pack's Python check., why: It reads its threshold from params.}
"""


def test_a_packs_python_check_registers_through_the_public_name(tmp_path):
    """A check written before Hit returned its evidence as a dict: it still works."""
    from precisionaudit.rules.checks import check, param

    @check
    def ex201_gate_sigmoid(graph, name, node, target):
        width = node["out_shape"][-1]
        return {"width": width, "min_width": param("min_width")} if width >= param("min_width") else None

    (tmp_path / "EX201.yaml").write_text(PACK_RULE)
    (rule,) = [r for r in load_rules(packs=[str(tmp_path)]) if r.id == "EX201"]
    target = Target("float16", "autocast", "cuda")
    graph = scanned_graph(HAZARD)
    found = run_rules(graph, [rule], target, HAZARD, "m")
    assert [(f.op, f.message, f.evidence["width"]) for f in found] == [
        ("sigmoid", "sigmoid on 64 features (at least 16)", 64)]
    rule.params["min_width"] = 128
    assert run_rules(graph, [rule], target, HAZARD, "m") == []


def test_each_rules_check_is_its_own_module_named_after_the_rule():
    """PA105 exp-log-low-precision names the check exp_log_low_precision, which lives in
    checks/pa105_exp_log_low_precision.py, alone with helpers of its own."""
    import inspect

    from precisionaudit.rules.checks import CHECKS, RULE_MODULES

    bundled = [r for r in load_rules() if r.check]
    assert len(bundled) >= 20
    for rule in bundled:
        assert rule.check == rule.name.replace("-", "_"), rule.id
        module = f"{rule.id.lower()}_{rule.check}"
        assert CHECKS[rule.check].__module__ == f"precisionaudit.rules.checks.{module}", rule.id
    checks_per_module = {}
    for fn in CHECKS.values():
        checks_per_module.setdefault(fn.__module__.rsplit(".", 1)[-1], []).append(fn.__name__)
    assert {m: checks_per_module.get(m) for m in RULE_MODULES} == {
        f"{r.id.lower()}_{r.check}": [r.check] for r in bundled}
    assert all(inspect.getmodule(CHECKS[r.check]).__doc__.startswith(f"{r.id} {r.name}") for r in bundled)


GRAPH_RULE = """\
id: EX202
name: gate-module
summary: a module that holds a sigmoid
severity: warning
severity_cases:
  small: {severity: info, when: "it is narrower than {wide} features"}
params: {wide: 128}
scope: graph
check: ex202_gate_module
message: "{module} holds a {op} ({why})"
fix: {action: keep_fp32}
doc: {what: An example pack's graph check., why: It reports a Hit.}
"""


def test_a_hit_names_the_case_module_line_and_fix_the_engine_reads(tmp_path):
    from precisionaudit.rules.checks import Fix, Hit, check, param

    @check
    def ex202_gate_module(graph, target):
        return [Hit(name, {"why": "a gate"}, case="small" if node["out_shape"][-1] < param("wide") else None,
                    module="gates.first", line=3, fix=Fix(ops=("linear", "sigmoid"), whole_modules=("gates",)))
                for name, node in graph.nodes(data=True) if node["op"] == "sigmoid"]

    (tmp_path / "EX202.yaml").write_text(GRAPH_RULE)
    (rule,) = [r for r in load_rules(packs=[str(tmp_path)]) if r.id == "EX202"]
    (found,) = run_rules(scanned_graph(HAZARD), [rule], Target("float16", "autocast", "cuda"), HAZARD, "m")
    assert (found.severity, found.module, found.line, found.column) == ("info", "gates.first", 3, None)
    assert found.message == "gates.first holds a sigmoid (a gate)"
    assert found.evidence == {"dtype": "float16", "why": "a gate"}
    assert found.fix == {"action": "keep_fp32", "ops": ["linear", "sigmoid"], "whole_modules": ["gates"],
                         "module": "gates.first"}


# --------------------------------------------------------------------------- strict templates
def _hazards_of_each_rule():
    """(rule, sample, mode) for one hazard sample of each bundled rule a scan without --data
    or --weights runs: the cases of test_rules.py, and PA113 and PA114."""
    from test_rules import CASES

    first = {"PA113": ("PA113", "pa113_phase_hazard.py", "pure"),
             "PA114": ("PA114", "pa114_additive_mask_hazard.py", "pure")}
    for rule, hazard, _, mode in CASES:
        first.setdefault(rule, (rule, hazard, mode))
    return sorted(first.values())


HAZARDS = _hazards_of_each_rule()


def _unfilled(message, fix) -> list:
    """The texts of a finding that still hold a ``{placeholder}``."""
    return [t for t in (message, *map(str, fix.values())) if "{" in t]


#: the FP4 rules: tests/test_fp4.py and tests/test_fp4_ranges.py render them (strict) on their samples
FP4_RULES = {"PA611", "PA612", "PA613", "PA614", "PA615", "PA616", "PA617"}


def test_every_bundled_rule_is_exercised_by_the_strict_template_tests():
    """PA001 is written from the source text; PA301-PA303 need --data / --weights (below);
    PA304-PA306 come from check --train (test_check_train_samples.py fills their templates);
    the training rules' messages are filled in their own tests (test_training_*.py render
    every message and fix of PA4xx with real values), the Keras rules' in test_keras_rules.py; the
    FP8 rules (PA601-PA603) judge only --dtype float8 and test_fp8.py renders theirs; the measured
    FP8 rules (PA604, PA605) need --data as well and test_fp8_ranges.py renders theirs; the FP4
    rules judge only --dtype nvfp4/mxfp4: test_fp4.py renders the static ones (PA611, PA612),
    test_fp4_ranges.py the measured ones; the watch's rules (PA7xx) come from a training job's log and tests/test_watch*.py render each
    on a real training loop."""
    training = {r.id for r in load_rules() if r.scope in ("training", "watch")}
    keras = {"PA501", "PA502"}  # Keras models: tests/test_keras_rules.py renders them (strict) on their samples
    covered = {h[0] for h in HAZARDS} | {"PA001", "PA301", "PA302", "PA303", "PA304", "PA305", "PA306"} | training \
        | keras | {"PA601", "PA602", "PA603", "PA604", "PA605"} | FP4_RULES
    assert covered == {r.id for r in load_rules()}


@pytest.mark.parametrize("rule,hazard,mode", HAZARDS, ids=[h[0] for h in HAZARDS])
def test_a_bundled_rules_templates_are_filled_by_the_values_its_check_gives(rule, hazard, mode):
    """Formatting is strict for bundled rules (a missing placeholder raises TemplateError), so
    each rule firing on its hazard sample proves its message and fix name only values the
    node, the engine or its check supply."""
    rules = [r for r in load_rules() if r.id == rule]
    results, found = scan([sample(hazard)], Target("float16", mode, "cuda"), rules)
    assert results[0].status == "ok", results[0].error  # a TemplateError is the model's error
    assert found and not any(_unfilled(f.message, f.fix) for f in found)


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """The PA303 sample's checkpoint, whose weights do not fit fp16."""
    from safetensors.torch import save_file

    from precisionaudit.runtime.pytorch.model_file import import_model_file

    path = tmp_path_factory.mktemp("pa303") / "folded.safetensors"
    save_file(import_model_file(sample("pa303_folded_hazard.py")).trained_state_dict(), path)
    return str(path)


@pytest.mark.parametrize("rule,model,flag", [
    ("PA301", "pa301_attention_hazard.py", "--data"),
    ("PA302", "pa302_gate_hazard.py", "--data"),
    ("PA303", "pa303_folded_hazard.py", "--weights"),
], ids=["PA301", "PA302", "PA303"])
def test_the_measured_rules_templates_are_filled_too(cli, folded, rule, model, flag):
    value = folded if flag == "--weights" else "calibration_batches"
    result = cli("scan", sample(model), flag, value, "--format", "json", "--select", rule)
    found = json.loads(result.stdout)["findings"]
    assert result.exit_code == 1 and found
    assert not any(_unfilled(f["message"], f["fix"]) for f in found)


def test_a_placeholder_nothing_supplies_is_an_error_in_a_bundled_rule():
    (rule,) = [replace(r, message=r.message + " {typo}") for r in load_rules() if r.id == "PA105"]
    graph = scanned_graph(sample("pa105_exp_hazard.py"), mode="pure")
    with pytest.raises(TemplateError, match=r"PA105.yaml: .* names \{typo\}"):
        run_rules(graph, [rule], Target("float16", "pure", "cuda"), "m.py", "m")


def test_a_rule_packs_template_stays_lenient():
    pack = os.path.join(TESTS, "rule_pack")
    (rule,) = [replace(r, message=r.message + " {typo}") for r in load_rules(packs=[pack]) if r.id == "EX101"]
    found = run_rules(scanned_graph(HAZARD), [rule], Target("float16", "autocast", "cuda"), HAZARD, "m")
    assert found and found[0].message.endswith(" {typo}")
