"""Baselines hide known findings by line-independent fingerprints; new ones still fail."""
import json
import os

import pytest
from gate_models import HAZARD, HAZARD_LINE, NOT_A_MODEL, write

from precisionaudit.core import atomic
from precisionaudit.core.errors import UsageError
from precisionaudit.core.findings import Finding
from precisionaudit.core.target import Target
from precisionaudit.settings import baseline

MASK = "        scores = scores.masked_fill(mask, -1e9)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    write(tmp_path, "model.py", HAZARD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _findings(result):
    return [(f["rule"], f["line"]) for f in json.loads(result.stdout)["findings"]]


def test_write_then_read_hides_known_and_shows_new_findings(project, cli):
    written = cli("scan", "--isolated", "--write-baseline", "base.json", "model.py")
    assert written.exit_code == 0
    assert "wrote 1 finding to base.json" in written.stderr
    document = json.loads((project / "base.json").read_text())
    (entry,) = document["findings"]  # readable: what the commit accepts, not just hashes
    assert (entry["rule"], entry["path"], entry["module"], entry["op"], entry["line"]) == (
        "PA107", "model.py", "attn", "masked_fill", HAZARD_LINE)

    # lines inserted above the finding move it, but do not resurface it
    moved = HAZARD.replace("import torch\n", "import torch\n\n# a comment\nimport math\n\n", 1)
    write(project, "model.py", moved)
    hidden = cli("scan", "--isolated", "--format", "json", "--baseline", "base.json", "model.py")
    assert hidden.exit_code == 0 and _findings(hidden) == []
    assert "1 finding hidden by baseline base.json" in hidden.stderr
    assert _findings(cli("scan", "--isolated", "--format", "json", "model.py")) == [("PA107", HAZARD_LINE + 4)]

    # a genuinely new hazard of the same rule in the same module does show, at its own line
    second = moved.replace(MASK, MASK + "        scores = scores.masked_fill(mask.flip(-1), -3e5)\n")
    write(project, "model.py", second)
    new = cli("scan", "--isolated", "--format", "json", "--baseline", "base.json", "model.py")
    assert new.exit_code == 1
    assert _findings(new) == [("PA107", HAZARD_LINE + 5)]


def test_baseline_from_settings_is_relative_to_the_settings_file(project, cli):
    assert cli("scan", "--isolated", "--write-baseline", "base.json", "model.py").exit_code == 0
    (project / "pyproject.toml").write_text('[tool.precisionaudit]\nbaseline = "base.json"\n')
    (project / "sub").mkdir()
    os.chdir(project / "sub")
    # fingerprints name files relative to the settings file, wherever the scan starts
    assert cli("scan", os.path.join("..", "model.py")).exit_code == 0
    assert cli("scan", "--isolated", os.path.join("..", "model.py")).exit_code == 1
    os.chdir(project)
    assert cli("scan", "./model.py").exit_code == 0  # ./model.py and model.py are the same file


def test_baseline_is_not_written_when_a_model_fails(project, cli):
    write(project, "broken.py", "def get_model():\n    raise RuntimeError('no weights')\n")
    result = cli("scan", "--isolated", "--write-baseline", "base.json", "model.py", "broken.py")
    assert result.exit_code == 2
    assert not (project / "base.json").exists()
    assert "broken.py: get_model() raised RuntimeError: no weights" in result.stderr


@pytest.mark.parametrize("content, message", [
    ("{not json", "not a precisionaudit baseline (invalid JSON"),
    ('{"tool": "ruff", "findings": []}', "not a precisionaudit baseline (expected findings"),
    ('{"tool": "precisionaudit", "findings": [{"rule": "PA107"}]}', "expected findings with fingerprints"),
    ('{"tool": "precisionaudit", "baseline": 99, "findings": []}', "baseline format 99"),
])
def test_bad_baseline_files_are_usage_errors(project, cli, content, message):
    (project / "bad.json").write_text(content)
    result = cli("scan", "--isolated", "--baseline", "bad.json", "model.py")
    assert result.exit_code == 2
    assert result.stderr.startswith("precisionaudit: error: bad.json: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_missing_baseline_is_reported_before_any_model_is_loaded(project, cli):
    write(project, "utils.py", NOT_A_MODEL)
    result = cli("scan", "--isolated", "--baseline", "missing.json", "utils.py")
    assert result.exit_code == 2 and "missing.json: no such baseline file" in result.stderr


def _finding():
    return Finding(rule="PA107", name="unrepresentable-constant", severity="error", path="m.py", line=3,
                   model="m.py:get_model", node="masked_fill", op="masked_fill", module="attn",
                   message="m", fingerprint="abc")


def test_a_failed_write_keeps_the_old_baseline_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "base.json"
    baseline.write_baseline(str(path), [_finding()], Target())
    before = path.read_text()

    def explode(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", explode)
    with pytest.raises(UsageError, match="base.json: cannot write baseline: No space left on device"):
        baseline.write_baseline(str(path), [], Target())
    assert path.read_text() == before
    assert os.listdir(tmp_path) == ["base.json"]
    assert baseline.read_baseline(str(path)) == {"abc"}
