"""docs/ is the user's reference: every contract, one page per rule and every flag, kept
current with the code (the generated pages are regenerated here and compared)."""
import glob
import json
import os
import re

import click
import pytest
from gate_models import HAZARD, write

from precisionaudit.reference_docs import all_pages
from precisionaudit.rules.docs import DOCS_URL, rule_url
from precisionaudit.rules.engine import load_rules

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
CONTRACTS = ("exit-codes.md", "json-report.md", "check-report.md", "plan-file.md", "settings.md",
             "cli.md", "rules/index.md")


def _read(rel):
    with open(os.path.join(DOCS, rel), encoding="utf-8") as fh:
        return fh.read()


@pytest.mark.parametrize("rel, text", sorted(all_pages().items()))
def test_generated_pages_are_current(rel, text):
    assert os.path.isfile(os.path.join(DOCS, rel)), f"docs/{rel} missing: run python -m " \
                                                    "precisionaudit.reference_docs"
    assert _read(rel) == text, f"docs/{rel} is stale: run python -m precisionaudit.reference_docs"


def test_one_page_per_rule_and_no_page_without_a_rule():
    ids = {r.id for r in load_rules(checks=False)}
    pages = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(DOCS, "rules", "PA*.md"))}
    assert pages == ids
    catalog = _read("rules/index.md")
    assert all(f"[{i}]({i}.md)" in catalog for i in ids)
    page = _read("rules/PA106.md")
    assert page.startswith("# PA106 attention-logits-overflow\n") and "## Use instead" in page
    assert page.index("## Use instead") < page.index("## Notes\n") and "CUDABlas.cpp" in page.split("## Notes")[1]
    assert "```python\nscores = (q @ k.transpose(-2, -1)) / math.sqrt(d)" in page


def test_every_flag_of_every_command_is_documented():
    from precisionaudit.cli import main

    cli = _read("cli.md")
    for name, command in main.commands.items():
        section = cli.split(f"## `precisionaudit {name}`", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert re.search(rf"(^|[\s,]){re.escape(opt)}\b", section, re.M), (name, opt)


@pytest.mark.parametrize("name", ["scan", "explain", "rules", "plan", "check", "convert", "watch"])
def test_every_command_shows_examples_that_its_own_parser_accepts(name):
    """Each --help ends with examples; each parses with the command it names (a renamed or
    removed flag fails here), and one at least is of the command itself."""
    import shlex

    from precisionaudit.cli import main

    command = main.commands[name]
    ctx = click.Context(command, info_name=f"precisionaudit {name}")
    shown = command.get_help(ctx)
    lines = [line.strip() for line in shown.splitlines()]
    assert "Examples:" in lines, name
    examples = [line for line in lines[lines.index("Examples:") + 1:] if line]
    assert any(e.startswith(f"precisionaudit {name} ") for e in examples), examples
    for example in examples:
        words = shlex.split(re.split(r"\s{2,}", example)[0])  # the command, not its description
        assert words[0] == "precisionaudit" and words[1] in main.commands, example
        main.commands[words[1]].make_context(words[1], words[2:])  # raises on an unknown flag


def test_contract_pages_exist_and_readme_and_code_point_there_not_to_design_md():
    for rel in CONTRACTS:
        assert _read(rel).startswith("# "), rel
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert "DESIGN.md" not in readme
    for rel in ("docs/json-report.md", "docs/check-report.md", "docs/plan-file.md", "docs/exit-codes.md",
                "docs/settings.md", "docs/rules/index.md", "docs/cli.md"):
        assert f"({rel})" in readme, rel
    stale = [p for p in glob.glob(os.path.join(ROOT, "precisionaudit", "**", "*.py"), recursive=True)
             if "DESIGN.md" in open(p, encoding="utf-8").read()]
    assert not stale


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_readme_and_the_docs_resolves():
    """Relative links to files (pages, the report's picture, bench/README.md) and their
    anchors: a page moved or a heading renamed fails here."""
    pages = [os.path.join(ROOT, "README.md"), *glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)]
    checked = 0
    for path in pages:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)(#[^)\s]*)?\)", text):
            linked = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
            assert os.path.exists(linked), (path, target)
            if anchor and linked.endswith(".md"):
                with open(linked, encoding="utf-8") as fh:
                    headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", fh.read(), re.M)}
                assert anchor[1:] in headings, (path, target + anchor)
            checked += 1
    assert checked > 100


def test_the_readme_is_read_in_five_minutes_and_links_every_docs_page():
    """At most 250 lines (issue 44), one picture, and a link to each page of docs/ but the
    generated rule pages (the catalog links those)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert len(readme.splitlines()) <= 250
    assert readme.count("](docs/report.png)") == 1 and os.path.getsize(os.path.join(DOCS, "report.png")) < 300_000
    pages = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(DOCS, "*.md"))} | {"docs/rules/index.md"}
    assert {p for p in pages if f"]({p})" not in readme} == set()


def _steps(command: str) -> list[str]:
    """The steps of a shell command line, as CI's script would run them one a line: ``&&``
    split, comments dropped, pip's ``-q`` ignored."""
    steps = [step.split("  #", 1)[0].strip() for step in command.split("&&")]
    return [re.sub(r"^pip install -q ", "pip install ", step) for step in steps if step]


def test_the_readmes_two_set_up_commands_are_the_ones_ci_runs():
    """The README's set-up is two commands (install and scan a sample; the tests), and .ci/run
    runs the same steps: a drifted pin or test command fails here, not on a newcomer's machine."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        section = fh.read().split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        script = fh.read()
    ci = [step for line in script.splitlines() if not line.lstrip().startswith("#") for step in _steps(line.strip())]
    install, tests = re.findall(r"```sh\n(.+?)\n```", section, re.S)
    assert "\n" not in install and "\n" not in tests  # one line each, to copy and paste
    install, tests = _steps(install), _steps(tests)
    assert install[:3] == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install torch==2.13.0"]
    assert all(step in ci for step in install[:3]), (install, ci)
    assert install[3:] == ["pip install -e .", "precisionaudit scan sample_models/pa107_mask_hazard.py"]
    assert os.path.isfile(os.path.join(ROOT, "sample_models", "pa107_mask_hazard.py"))
    assert tests == ['. .venv/bin/activate', 'pip install -e ".[test,onnx,html]" -c constraints.txt',
                     "python -m pytest -q"]
    assert all(step in ci for step in tests), (tests, ci)
    assert script.split("# the test command of README.md:\n", 1)[1].splitlines()[0] == tests[-1]


def test_json_report_page_names_every_key_the_report_has(tmp_path, monkeypatch, cli):
    write(tmp_path, "model.py", HAZARD)
    monkeypatch.chdir(tmp_path)
    report = json.loads(cli("scan", "--isolated", "--format", "json", "model.py").stdout)
    example = _read("json-report.md").split("```json\n", 1)[1].split("```", 1)[0]
    documented = json.loads(example)
    assert set(report) == set(documented)
    assert set(report["models"][0]) == set(documented["models"][0])
    assert set(report["findings"][0]) == set(documented["findings"][0])
    assert set(report["settings"][0]) == set(documented["settings"][0])


def test_rules_link_to_their_page_from_sarif_rules_and_the_text_report(tmp_path, monkeypatch, cli):
    assert rule_url("PA106") == f"{DOCS_URL}/rules/PA106.md"
    assert f"Docs: {rule_url('PA106')}" in cli("rules", "PA106").stdout
    write(tmp_path, "model.py", HAZARD)
    monkeypatch.chdir(tmp_path)
    sarif = json.loads(cli("scan", "--isolated", "--format", "sarif", "model.py").stdout)
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rules and all(r["helpUri"] == rule_url(r["id"]) for r in rules)
    linked = cli("scan", "--isolated", "--color", "always", "model.py").stdout
    assert f"\x1b]8;;{rule_url('PA107')}\x1b\\" in linked  # an OSC 8 hyperlink on the rule id
    assert "\x1b]8;;" not in cli("scan", "--isolated", "model.py").stdout
