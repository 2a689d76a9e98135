"""The rules package's structure: checks register in a leaf registry (no import cycle with
the engine), and a rule pack's Python check registers through the public
``precisionaudit.rules.checks.check`` and reads its thresholds with ``param``."""
import os
import subprocess
import sys

from conftest import scanned_graph

from precisionaudit.core.target import Target
from precisionaudit.rules.engine import load_rules, run_rules

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
    assert [(f.op, f.message, f.evidence["width"]) for f in found] == [("sigmoid", "sigmoid on 64 features (at least 16)", 64)]
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
