"""Rule packs outside the package: a directory a settings file names, or one an installed
package names in the ``precisionaudit.rules`` entry point group. The example pack
(tests/rule_pack) adds EX101; ``scan`` runs it and ``rules`` documents it."""
import json
import os
import textwrap

import pytest
from conftest import imported_by_a_scan

from precisionaudit.core.target import Target
from precisionaudit.rules.docs import rule_url
from precisionaudit.rules.engine import load_rules, rule_ids, run_rules
from precisionaudit.scanner import scan

TESTS = os.path.dirname(os.path.abspath(__file__))
PACK = os.path.join(TESTS, "rule_pack")
HAZARD = os.path.join(TESTS, "models", "ex101_sigmoid_hazard.py")
CLEAN = os.path.join(TESTS, "models", "ex101_sigmoid_clean.py")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose precisionaudit.toml names the example pack, with both models in it."""
    (tmp_path / "precisionaudit.toml").write_text(f'rule-packs = ["{PACK}"]\nextend-select = ["EX1"]\n')
    for model in (HAZARD, CLEAN):
        (tmp_path / os.path.basename(model)).write_text(open(model).read())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ex101(cli, path):
    report = json.loads(cli("scan", path, "--format", "json").stdout)
    return [f for f in report["findings"] if f["rule"] == "EX101"]


def test_scan_runs_a_rule_of_a_pack_the_settings_name(cli, project):
    found = ex101(cli, "ex101_sigmoid_hazard.py")
    assert [(f["op"], f["severity"], f["fix"]["action"]) for f in found] == [("sigmoid", "info", "keep_fp32")]
    assert "rounds to exactly 1" in found[0]["message"]
    assert ex101(cli, "ex101_sigmoid_clean.py") == []


def test_show_settings_names_the_pack(cli, project):
    assert f"  rule-packs: {json.dumps([PACK])}" in cli("scan", "--show-settings", ".").stdout.splitlines()


def test_without_the_settings_the_pack_does_not_run(cli, project):
    assert ex101(cli, HAZARD) == []  # the copy in sample dir has no settings above it


def test_rules_documents_the_packs_rules(cli, project):
    page = cli("rules", "EX101").stdout
    assert page.startswith("EX101 sigmoid-low-precision") and "## Why is this bad?" in page
    assert "EX101" in cli("rules").stdout.split()


def test_a_packs_rule_links_to_no_page_of_the_bundled_docs(cli, project):
    assert "Docs:" not in cli("rules", "EX101").stdout  # docs/rules/EX101.md does not exist
    assert f"Docs: {rule_url('PA101')}" in cli("rules", "PA101").stdout


def test_sarif_describes_a_packs_rule_without_a_page(cli, project):
    run = json.loads(cli("scan", "ex101_sigmoid_hazard.py", "--format", "sarif").stdout)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    [result] = [r for r in run["results"] if r["ruleId"] == "EX101"]
    assert rules[result["ruleIndex"]]["id"] == "EX101"
    assert rules[result["ruleIndex"]]["help"]["text"].startswith("EX101 sigmoid-low-precision")
    assert "helpUri" not in rules[result["ruleIndex"]]
    assert {r["id"]: r for r in rules}["PA101"]["helpUri"] == rule_url("PA101")


def test_a_missing_pack_directory_is_one_line(cli, tmp_path, monkeypatch):
    (tmp_path / "precisionaudit.toml").write_text('rule-packs = ["nowhere"]\n')
    monkeypatch.chdir(tmp_path)
    result = cli("scan", HAZARD, "--config", "precisionaudit.toml")
    assert result.exit_code == 2
    assert result.output.strip() == (f"precisionaudit: error: precisionaudit.toml: rule-packs[0]: no such "
                                     f"directory: {tmp_path / 'nowhere'}")


def test_an_invalid_rule_file_is_one_line_naming_the_key(cli, tmp_path, monkeypatch):
    pack = tmp_path / "pack"
    pack.mkdir()
    text = open(os.path.join(PACK, "EX101.yaml")).read().replace("action: keep_fp32", "action: repaint")
    (pack / "EX101.yaml").write_text(text)
    (tmp_path / "precisionaudit.toml").write_text('rule-packs = ["pack"]\n')
    monkeypatch.chdir(tmp_path)
    result = cli("rules")
    assert result.exit_code == 2
    assert result.output.startswith(f"precisionaudit: error: {pack / 'EX101.yaml'}: fix.action: 'repaint' "
                                    "is not one of ['keep_fp32', 'disable_autocast', 'replace',")


def install_example_pack(site, monkeypatch):
    """A distribution in ``site`` (put on sys.path) that names tests/rule_pack in the group."""
    (site / "example_pack").mkdir(parents=True)
    (site / "example_pack" / "__init__.py").write_text(
        f"def rules_dir():\n    return {PACK!r}\n")
    info = site / "example_pack-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: example-pack\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[precisionaudit.rules]\nexample = example_pack:rules_dir\n")
    monkeypatch.syspath_prepend(str(site))


def test_an_installed_package_adds_its_pack_through_the_entry_point(tmp_path, monkeypatch):
    install_example_pack(tmp_path / "site", monkeypatch)
    assert "EX101" in rule_ids()
    _, found = scan([HAZARD], Target("float16", "autocast", "cuda"), load_rules())
    assert [f.op for f in found if f.rule == "EX101"] == ["sigmoid"]


def test_thresholds_are_the_yaml_params(tmp_path):
    """PA103's check reads its 'short' threshold from the rule's params: change the data,
    change the severity."""
    from precisionaudit.analysis import run_passes
    from precisionaudit.capture.pytorch.capture import capture_file

    model = tmp_path / "sums.py"
    model.write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Sums(nn.Module):
            def forward(self, x):
                return x.half().sum(-1)

        def get_model():
            return Sums()

        def get_example_inputs():
            return (torch.randn(4, 100),)
    """))
    target = Target("float16", "pure", "cuda")
    graph = run_passes(capture_file(str(model), target).graph)
    (rule,) = [r for r in load_rules() if r.id == "PA103"]
    severities = []
    for short in (64, 1000):
        rule.params["short_extent"] = short
        severities += [f.severity for f in run_rules(graph, [rule], target, str(model), "m")]
    assert severities == ["warning", "info"]  # 100 elements: not short below 64, short below 1000


def test_the_bundled_rules_conform_to_the_schema():
    """Loading the bundled pack skips the schema (no jsonschema import for `rules`): this holds it."""
    import yaml

    from precisionaudit.core.schema import schema_error
    from precisionaudit.rules.schema import RULE_SCHEMA

    bundled = os.path.join(os.path.dirname(TESTS), "rules")
    files = sorted(f for f in os.listdir(bundled) if f.endswith(".yaml"))
    assert len(files) >= 19
    errors = {f: schema_error(yaml.safe_load(open(os.path.join(bundled, f))), RULE_SCHEMA) for f in files}
    assert {f: e for f, e in errors.items() if e} == {}


def test_the_bundled_rules_match_on_facts_that_exist():
    """Loading the bundled pack skips the check of ``match.where`` against the fact records
    (no import of analysis/facts.py for a training scan): this holds it."""
    import yaml

    from precisionaudit.analysis.facts import path_error

    bundled = os.path.join(os.path.dirname(TESTS), "rules")
    keys = [key for f in sorted(os.listdir(bundled)) if f.endswith(".yaml")
            for key in (yaml.safe_load(open(os.path.join(bundled, f))).get("match") or {}).get("where", {})]
    assert "precision.low_precision" in keys
    assert {key: path_error(key) for key in keys if path_error(key)} == {}


def test_a_scan_reads_the_bundled_pack_and_the_entry_points_once(cli, tmp_path, monkeypatch):
    """rule_ids, discover and the rules a scan runs each ask for the catalog: the bundled
    files are parsed, and the installed distributions' entry points read, once per process."""
    import importlib.metadata

    import yaml

    from precisionaudit.rules import engine

    loads, scans = [], []
    real_load, real_entry_points = yaml.load, importlib.metadata.entry_points
    monkeypatch.setattr(yaml, "load", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **k: scans.append(1) or real_entry_points(**k))
    monkeypatch.setattr(engine, "kept_documents", lambda directory, names, parse: parse())  # none kept
    engine._bundled_documents.cache_clear()
    (tmp_path / "train.py").write_text("x = 1\n")
    bundled = [f for f in os.listdir(os.path.join(os.path.dirname(TESTS), "rules")) if f.endswith(".yaml")]
    for _ in range(2):
        assert cli("scan", "--isolated", "--skip-non-models", tmp_path / "train.py").exit_code == 0
    assert (len(loads), scans) == (len(bundled), [])  # and no pack is installed: no entry point read
    install_example_pack(tmp_path / "site", monkeypatch)
    for _ in range(2):
        assert cli("scan", "--isolated", "--skip-non-models", tmp_path / "train.py").exit_code == 0
    assert len(scans) == 1


def test_only_a_path_that_may_hold_a_pack_is_read_with_importlib_metadata(tmp_path):
    from precisionaudit.rules.engine import _may_name_packs

    site = tmp_path / "site"
    (site / "other-1.0.dist-info").mkdir(parents=True)
    (site / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    (site / "legacy.egg-info").write_text("Metadata-Version: 1.0\n")  # a file: no entry points
    assert not _may_name_packs((str(site), str(tmp_path / "missing")))
    (tmp_path / "packed.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # importlib.metadata looks inside
    assert _may_name_packs((str(site), str(tmp_path / "packed.zip")))
    (site / "Named-2.0.DIST-INFO").mkdir()
    (site / "Named-2.0.DIST-INFO" / "entry_points.txt").write_text("[precisionaudit.rules]\nx = named:rules\n")
    assert _may_name_packs((str(site),))


def test_a_scan_without_an_installed_pack_does_not_import_importlib_metadata(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n")
    assert imported_by_a_scan(tmp_path, "--isolated", "train.py", modules=["importlib.metadata"]) == "0 []"


def test_each_load_of_the_rules_is_its_own_copy():
    (first,) = [r for r in load_rules(checks=False) if r.id == "PA103"]
    (again,) = [r for r in load_rules(checks=False) if r.id == "PA103"]
    first.params["short_extent"] = -1
    assert again.params["short_extent"] != -1
    assert [r.params for r in load_rules(checks=False) if r.id == "PA103"] == [again.params]
