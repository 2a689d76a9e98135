"""Settings are resolved per scanned file (the nearest config above it, as ruff does), so the
same file scans the same wherever the command is started; --show-settings says which applied."""
import json

import pytest
from gate_models import HAZARD, write


@pytest.fixture
def two_projects(tmp_path, monkeypatch):
    """bf16/ says dtype = bfloat16 (-1e9 fits: no PA107); plain/ has no settings file."""
    for name in ("bf16", "plain"):
        (tmp_path / name).mkdir()
        write(tmp_path / name, "hazard.py", HAZARD)
    (tmp_path / "bf16" / "pyproject.toml").write_text('[tool.precisionaudit]\ndtype = "bfloat16"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _rules_by_file(result):
    found = {}
    for f in json.loads(result.stdout)["findings"]:
        found.setdefault(f["path"].replace("\\", "/").rsplit("/", 2)[-2], []).append(f["rule"])
    return found


def test_each_file_gets_the_settings_above_it(two_projects, cli):
    result = cli("scan", "--format", "json", "bf16/hazard.py", "plain/hazard.py")
    assert result.exit_code == 1
    assert _rules_by_file(result) == {"plain": ["PA107"]}
    settings = json.loads(result.stdout)["settings"]
    assert [(s["config"], s["files"], s["target"]["dtype"]) for s in settings] == [
        ("bf16/pyproject.toml", ["bf16/hazard.py"], "bfloat16"),
        (None, ["plain/hazard.py"], "float16")]


def test_the_same_file_scans_the_same_from_anywhere(two_projects, cli, monkeypatch):
    monkeypatch.chdir(two_projects / "plain")  # no settings file here or above
    assert cli("scan", "../bf16/hazard.py").exit_code == 0
    assert cli("scan", "hazard.py").exit_code == 1


def test_flags_win_over_every_file_and_config_names_one_for_all(two_projects, cli):
    assert cli("scan", "--dtype", "float16", "bf16/hazard.py").exit_code == 1
    (two_projects / "one.toml").write_text('dtype = "bfloat16"\n')
    assert cli("scan", "--config", "one.toml", "bf16/hazard.py", "plain/hazard.py").exit_code == 0


def test_plan_uses_the_settings_above_the_model(two_projects, cli):
    assert cli("plan", "bf16/hazard.py", "-o", "p.yaml").exit_code == 0
    assert "target: {dtype: bfloat16" in (two_projects / "p.yaml").read_text()


def test_show_settings_names_the_file_and_values_without_scanning(two_projects, cli):
    result = cli("scan", "--show-settings", "--ignore", "PA2", "bf16", "plain")
    assert result.exit_code == 0
    blocks = result.stdout.split("settings: ")[1:]
    assert blocks[0].startswith("bf16/pyproject.toml\n  files: bf16/hazard.py\n"
                                "  target: dtype bfloat16, mode autocast, device cuda\n  fail-on: error\n")
    assert blocks[1].startswith("(defaults: no settings file)\n  files: plain/hazard.py\n"
                                "  target: dtype float16")
    assert "PA107" in blocks[0] and "PA201" not in blocks[0]  # the command line's --ignore applies


def test_a_broken_settings_file_anywhere_stops_before_any_model_loads(two_projects, cli):
    (two_projects / "plain" / "precisionaudit.toml").write_text('dtype = "float4"\n')
    result = cli("scan", "bf16/hazard.py", "plain/hazard.py")
    assert result.exit_code == 2 and result.stdout == ""
    assert "plain/precisionaudit.toml" in result.stderr and "dtype" in result.stderr
