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


def test_severity_note_shown_where_a_check_adjusts_it(cli):
    assert "error (overflows to inf)" in cli("rules", "PA107").stdout
