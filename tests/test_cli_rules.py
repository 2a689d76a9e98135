"""`precisionaudit rules`: the catalog and each rule's documentation page."""
import pytest

from precisionaudit.rules.engine import load_rules

RULES = load_rules()


def test_catalog_lists_every_rule_once(cli):
    lines = cli("rules").stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [r.id for r in RULES]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_full_doc_page(cli, rule):
    page = cli("rules", rule.id).stdout
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in page, f"{rule.id} lacks {section}"


def test_rule_page_by_name(cli):
    assert cli("rules", "attention-logits-overflow").stdout.startswith("PA106 attention-logits-overflow")


def test_severity_cases_shown_where_a_check_adjusts_it(cli):
    assert "Default severity: error; warning when the constant underflows to 0" in cli("rules", "PA107").stdout
    assert "info when fewer than 64 elements are reduced" in cli("rules", "PA103").stdout


def test_rules_never_imports_torch_or_numpy():
    """`rules` reads the YAML packs only: importing torch (3-15 s) or numpy (0.1-0.3 s) would
    make it slow."""
    import subprocess
    import sys

    code = ("import sys\nfrom precisionaudit.cli import main\n"
            "for args in (['rules'], ['rules', 'PA1'], ['rules', 'PA106'], ['rules', '--format', 'json']):\n"
            "    try:\n        main(args)\n    except SystemExit as e:\n        assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "assert 'numpy' not in sys.modules, 'numpy was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_prefix_lists_one_family(cli):
    ids = [line.split()[0] for line in cli("rules", "PA2").stdout.splitlines()[1:]]
    assert ids == [r.id for r in RULES if r.id.startswith("PA2")] and len(ids) > 1


def test_catalog_as_json(cli):
    import json

    records = json.loads(cli("rules", "--format", "json").stdout)
    assert [r["id"] for r in records] == [r.id for r in RULES]
    page = json.loads(cli("rules", "PA106", "--format", "json").stdout)
    assert page["name"] == "attention-logits-overflow" and "why" in page["doc"]
    family = json.loads(cli("rules", "pa1", "--format", "json").stdout)
    assert {r["id"][:3] for r in family} == {"PA1"}


def test_unknown_rule_or_prefix_is_a_usage_error():
    from click.testing import CliRunner

    from precisionaudit.cli import main

    result = CliRunner().invoke(main, ["rules", "PA9"])
    assert result.exit_code == 2 and "unknown rule or prefix 'PA9'" in result.output
