"""Suppression comments on the op's source line, and PA001 for the unused ones."""
import json
import textwrap

import pytest
from gate_models import CLEAN, HAZARD, HAZARD_LINE, write

from precisionaudit.settings.suppressions import parse_directives

MASK = "scores = scores.masked_fill(mask, -1e9)"
SAFE_MASK = "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)"


def _codes(source):
    return [(d.line, d.own, d.codes) for d in parse_directives(textwrap.dedent(source))]


def test_comment_forms():
    assert _codes("""\
        a = 1  # precisionaudit: ignore[PA107, pa109]
        b = 2  # precisionaudit: ignore
        c = 3  # noqa: PA107,E501
        d = 4  # noqa:PA105 some reason
        e = 5  # noqa
        f = 6  # NOQA - bare, with a reason
        """) == [(1, True, ("PA107", "PA109")), (2, True, None), (3, False, ("PA107", "E501")),
                 (4, False, ("PA105",)), (5, False, None), (6, False, None)]


def test_hash_inside_a_string_is_not_a_comment():
    assert _codes('s = "# noqa: PA107"\nt = 1  # precisionaudit: ignore[PA1]\n') == [(2, True, ("PA1",))]


def test_a_comment_covers_the_whole_wrapped_statement_but_not_its_neighbours():
    (directive,) = parse_directives(textwrap.dedent("""\
        x = 1
        scores = scores.masked_fill(
            mask, -1e9
        )  # noqa: PA107
        y = 2
        """))
    assert [line for line in range(1, 6) if directive.covers(line)] == [2, 3, 4]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    """JSON report and exit code of one scan over variants of the hazard and its clean twin."""
    directory = tmp_path_factory.mktemp("suppress")
    variants = {
        "own_code.py": HAZARD.replace(MASK, MASK + "  # precisionaudit: ignore[PA107]"),
        "noqa_code.py": HAZARD.replace(MASK, MASK + "  # noqa: PA107"),
        "bare_noqa.py": HAZARD.replace(MASK, MASK + "  # noqa"),
        "wrong_code.py": HAZARD.replace(MASK, MASK + "  # precisionaudit: ignore[PA105]"),
        "foreign_noqa.py": HAZARD.replace(MASK, MASK + "  # noqa: E501"),
        "unused.py": CLEAN.replace(SAFE_MASK, SAFE_MASK + "  # noqa: PA107, E501, PA999"),
        "unused_bare.py": CLEAN.replace(SAFE_MASK, SAFE_MASK + "  # precisionaudit: ignore  # noqa"),
        "wrapped.py": HAZARD.replace(MASK, "scores = scores.masked_fill(\n            mask, -1e9\n"
                                           "        )  # precisionaudit: ignore[PA107]"),
    }
    for name, source in variants.items():
        assert source != HAZARD and source != CLEAN, name
        write(directory, name, source)
    from click.testing import CliRunner

    from precisionaudit.cli import main

    result = CliRunner().invoke(main, ["scan", "--isolated", "--format", "json",
                                       *(str(directory / n) for n in variants)])
    report = json.loads(result.stdout)
    found = {}
    for f in report["findings"]:
        found.setdefault(f["path"].rsplit("/", 1)[-1], []).append(f)
    return result.exit_code, found


def test_matching_comments_suppress_the_finding(scanned):
    _, found = scanned
    for name in ("own_code.py", "noqa_code.py", "bare_noqa.py", "wrapped.py"):
        assert name not in found, found.get(name)


def test_other_codes_do_not_suppress(scanned):
    exit_code, found = scanned
    assert exit_code == 1
    for name in ("wrong_code.py", "foreign_noqa.py"):
        assert [(f["rule"], f["line"]) for f in found[name] if f["rule"] != "PA001"] == [("PA107", HAZARD_LINE)]


def test_unused_suppressions_are_info_findings_on_the_comment_line(scanned):
    _, found = scanned
    (unused,) = found["unused.py"]
    assert (unused["rule"], unused["severity"], unused["line"]) == ("PA001", "info", HAZARD_LINE)
    assert "no PA107 finding here" in unused["message"] and "PA999 is not a rule id" in unused["message"]
    assert sorted(unused["evidence"]["unused"]) == ["PA107", "PA999"]  # E501 is another linter's
    (bare,) = found["unused_bare.py"]  # the bare noqa beside it may belong to another linter
    assert bare["evidence"]["comment"] == "# precisionaudit: ignore"
    (wrong,) = [f for f in found["wrong_code.py"] if f["rule"] == "PA001"]
    assert "no PA105 finding here" in wrong["message"]


def test_codes_of_rules_that_did_not_run_are_not_called_unused(tmp_path, cli, monkeypatch):
    write(tmp_path, "unused.py", CLEAN.replace(SAFE_MASK, SAFE_MASK + "  # noqa: PA107"))
    monkeypatch.chdir(tmp_path)
    result = cli("scan", "--isolated", "--ignore", "PA107", "--fail-on", "info", "unused.py")
    assert result.exit_code == 0, result.stdout
    assert cli("scan", "--isolated", "--fail-on", "info", "unused.py").exit_code == 1
