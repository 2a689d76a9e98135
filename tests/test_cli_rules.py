"""`precisionaudit rules`: the catalog and each rule's documentation page."""
import re

import pytest

from precisionaudit.rules.engine import load_rules

RULES = load_rules()


def _catalog_rows(text: str) -> dict:
    """{rule id: [default, summary]} read back from the table, its wrapped lines joined."""
    header, *lines = text.splitlines()
    starts = [header.index(title) for title in ("default", "summary")]
    rows = {}
    for line in lines:
        if not line.startswith(" "):
            current = rows.setdefault(line.split()[0], [[], []])
        for cell, start, end in zip(current, starts, starts[1:] + [None]):
            cell.append(line[start:end].strip())
    return {rid: [" ".join(filter(None, cell)) for cell in cells] for rid, cells in rows.items()}


def test_catalog_lists_every_rule_once(cli):
    lines = cli("rules").stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == [r.id for r in RULES]


@pytest.mark.parametrize("width", [80, 100, 500])
def test_catalog_fits_the_terminal_and_keeps_every_word(width):
    """Issue 21: one long severity text made the table 420 columns wide. It fits the terminal
    now; wrapped, every severity and summary still reads in full, as `rules --format json` has it."""
    from precisionaudit.rules.docs import _severity, render_catalog

    text = render_catalog(RULES, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    no_space = lambda *cells: ["".join(c.split()) for c in cells]  # noqa: E731 - a word too long for the column is cut
    assert ({rid: no_space(*cells) for rid, cells in _catalog_rows(text).items()}
            == {r.id: no_space(_severity(r), r.summary) for r in RULES})
    wrapped = len(text.splitlines()) > len(RULES) + 1
    assert wrapped == (width < 500), "only a terminal wider than the longest row shows each rule on one line"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_full_doc_page(cli, rule):
    page = cli("rules", rule.id).stdout
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in page, f"{rule.id} lacks {section}"


def test_notes_come_after_use_instead_and_hold_the_kernel_sources(cli):
    """The CUDA/cuBLAS sources behind PA106 are a Notes section, last, not part of what it does."""
    page = cli("rules", "PA106").stdout
    before, notes = page.split("## Notes\n")
    assert "## Use instead" in before and "CUDABlas.cpp" in notes and "CUDABlas.cpp" not in before
    assert not notes.lstrip().startswith("#") and "## " not in notes


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_what_it_does_cites_no_source_file(rule):
    """Kernel and library source files (SoftMax.cu, CUDABlas.cpp, ...) belong in doc.notes."""
    assert not re.search(r"\w\.(cu|cuh|cpp|cc|h)\b", rule.doc["what"]), rule.id


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
    ids = [line.split()[0] for line in cli("rules", "PA2").stdout.splitlines()[1:] if not line.startswith(" ")]
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
