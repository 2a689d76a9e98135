"""Settings files: discovery, strict checking (exit 2 naming file and key), precedence."""
import json
import os

import pytest
from gate_models import HAZARD, HELPER, helper_model, write

from precisionaudit.core.errors import UsageError
from precisionaudit.rules.engine import rule_ids
from precisionaudit.settings.config import (
    Config,
    find_config,
    load_config,
    path_matches,
    selected_ids,
)

KNOWN = rule_ids()


def test_nearest_pyproject_with_the_table_wins_and_others_are_passed_over(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.precisionaudit]\nselect = ["PA1"]\n')
    sub = tmp_path / "pkg" / "models"
    sub.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.black]\nline-length = 99\n')
    found = load_config(start=str(sub), known_ids=KNOWN)
    assert found.path == str(tmp_path / "pyproject.toml")
    assert found.select == ["PA1"] and found.root == str(tmp_path)


def test_precisionaudit_toml_takes_top_level_keys_and_beats_pyproject_in_its_directory(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.precisionaudit]\ndtype = "float16"\n')
    (tmp_path / "precisionaudit.toml").write_text('dtype = "bfloat16"\n')
    assert load_config(start=str(tmp_path), known_ids=KNOWN).dtype == "bfloat16"


def test_isolated_ignores_even_a_broken_settings_file(tmp_path):
    (tmp_path / "precisionaudit.toml").write_text("selct = 1\n")
    assert load_config(isolated=True, start=str(tmp_path)) == Config()
    assert find_config(str(tmp_path))[0] == str(tmp_path / "precisionaudit.toml")


@pytest.mark.parametrize("body, key", [
    ('selct = ["PA1"]', "tool.precisionaudit.selct: unknown key"),
    ('select = ["PA999"]', "tool.precisionaudit.select: unknown rule id or prefix 'PA999'"),
    ('fail-on = "fatal"', "tool.precisionaudit.fail-on: unknown value 'fatal'"),
    ('dtype = 16', "tool.precisionaudit.dtype: expected a string, got int"),
    ('[tool.precisionaudit.severity]\nPA1 = "info"', "tool.precisionaudit.severity.PA1: unknown rule id 'PA1'"),
    ('[tool.precisionaudit.severity]\nPA111 = "loud"', "tool.precisionaudit.severity.PA111: unknown value 'loud'"),
    ('[tool.precisionaudit.per-file-ignores]\n"tests/*" = ["PA77"]',
     "tool.precisionaudit.per-file-ignores.'tests/*': unknown rule id or prefix 'PA77'"),
    ('[[tool.precisionaudit.suppress]]\nrule = "PA202"', "tool.precisionaudit.suppress[0]: needs at least one of"),
    ('[[tool.precisionaudit.suppress]]\nrule = "PA202"\nmodul = "lm_head"',
     "tool.precisionaudit.suppress[0].modul: unknown key"),
])
def test_bad_settings_name_the_file_and_the_key(tmp_path, body, key):
    if not body.startswith("["):
        body = "[tool.precisionaudit]\n" + body
    (tmp_path / "pyproject.toml").write_text(body + "\n")
    with pytest.raises(UsageError) as info:
        load_config(start=str(tmp_path), known_ids=KNOWN)
    assert str(info.value).startswith(f"{tmp_path / 'pyproject.toml'}: {key}")


def test_invalid_toml_and_a_missing_explicit_file_are_usage_errors(tmp_path):
    (tmp_path / "precisionaudit.toml").write_text("select = [\n")
    with pytest.raises(UsageError, match="precisionaudit.toml: invalid TOML"):
        load_config(start=str(tmp_path), known_ids=KNOWN)
    with pytest.raises(UsageError, match="nope.toml: no such config file"):
        load_config(str(tmp_path / "nope.toml"), known_ids=KNOWN)
    with pytest.raises(UsageError, match="exclude each other"):
        load_config(str(tmp_path / "precisionaudit.toml"), isolated=True)


def test_own_file_rejects_a_copied_tool_table(tmp_path):
    (tmp_path / "precisionaudit.toml").write_text('[tool.precisionaudit]\nselect = ["PA1"]\n')
    with pytest.raises(UsageError, match=r"precisionaudit.toml: tool: unknown key \(precisionaudit.toml takes"):
        load_config(start=str(tmp_path), known_ids=KNOWN)


def test_selection_layers_command_line_over_file():
    config = Config(select=["PA1"], ignore=["PA111"], extend_select=["PA202"])
    from_file = selected_ids(KNOWN, config)
    assert "PA107" in from_file and "PA202" in from_file
    assert "PA111" not in from_file and "PA201" not in from_file
    assert selected_ids(KNOWN, config, select=["PA111"]) == {"PA111"}  # --select starts over
    assert "PA107" not in selected_ids(KNOWN, config, ignore=["PA107"])
    with pytest.raises(UsageError, match="unknown rule id or prefix: PA9"):
        selected_ids(KNOWN, config, ignore=["PA9"])


@pytest.mark.parametrize("pattern, path, expected", [
    ("test_*.py", "a/b/test_x.py", True),  # no slash: the file name
    ("models/*.py", "models/gpt.py", True),  # with a slash: the path below the settings file
    ("models/*.py", "other/models/gpt.py", False),
    ("models/", "models/deep/gpt.py", True),
    ("./models/*", "models/gpt.py", True),
])
def test_path_patterns(tmp_path, monkeypatch, pattern, path, expected):
    monkeypatch.chdir(tmp_path)
    assert path_matches(pattern, path, str(tmp_path)) is expected


# --------------------------------------------------------------------------- through the CLI

@pytest.fixture
def project(tmp_path, monkeypatch):
    write(tmp_path, "hazard.py", HAZARD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _settings(project, text):
    (project / "pyproject.toml").write_text("[tool.precisionaudit]\n" + text)


def test_config_error_exits_2_with_one_line_naming_file_and_key(project, cli):
    _settings(project, 'ignore = ["PA107"]\nfail_on = "warning"\n')
    result = cli("scan", "hazard.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "precisionaudit: error: pyproject.toml: tool.precisionaudit.fail_on: unknown key"]
    assert result.stdout == ""


def test_settings_apply_and_command_line_flags_win(project, cli):
    _settings(project, 'fail-on = "warning"\n[tool.precisionaudit.severity]\nPA107 = "warning"\n')
    demoted = cli("scan", "--format", "json", "hazard.py")
    assert demoted.exit_code == 1  # a warning fails under the file's fail-on
    assert [f["severity"] for f in json.loads(demoted.stdout)["findings"]] == ["warning"]
    assert cli("scan", "--fail-on", "error", "hazard.py").exit_code == 0
    assert cli("scan", "--isolated", "--fail-on", "warning", "hazard.py").exit_code == 1


def test_dtype_from_settings_and_flag_override(project, cli):
    _settings(project, 'dtype = "bfloat16"\n')
    bf16 = cli("scan", "--format", "json", "hazard.py")
    assert json.loads(bf16.stdout)["target"]["dtype"] == "bfloat16"
    assert bf16.exit_code == 0  # -1e9 fits in bfloat16
    assert cli("scan", "--dtype", "float16", "hazard.py").exit_code == 1


def test_per_file_ignores_and_explicit_config_file(project, cli):
    (project / "strict.toml").write_text('[per-file-ignores]\n"haz*.py" = ["PA107"]\n')
    _settings(project, 'select = ["PA2"]\n')
    assert cli("scan", "--config", "strict.toml", "hazard.py").exit_code == 0
    result = cli("scan", "--config", "missing.toml", "hazard.py")
    assert result.exit_code == 2 and "missing.toml: no such config file" in result.stderr


def test_suppress_patterns_hide_lineless_findings_by_module(project, cli):
    write(project, "pa_config_helper.py", HELPER)
    write(project, "via_helper.py", helper_model("pa_config_helper"))
    _settings(project, '[[tool.precisionaudit.suppress]]\nrule = "PA107"\nmodule = "other*"\n')
    assert cli("scan", "via_helper.py").exit_code == 1
    _settings(project, '[[tool.precisionaudit.suppress]]\nrule = "PA107"\nmodule = "att*"\n'
                       'reason = "mask added in the helper, fixed upstream"\n')
    result = cli("scan", "--format", "json", "via_helper.py")
    assert result.exit_code == 0 and json.loads(result.stdout)["findings"] == []


def test_the_documented_settings_example_is_valid(tmp_path):
    page = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "settings.md")).read()
    section = page.split("## Settings", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(example)
    (tmp_path / "lint" / "precision-rules").mkdir(parents=True)  # its rule-packs directory
    (tmp_path / "src").mkdir()  # a pythonpath directory
    config = load_config(start=str(tmp_path), known_ids=KNOWN)
    assert config.dtype == "bfloat16" and config.severity == {"PA111": "warning"}
    assert config.rule_packs == [str(tmp_path / "lint" / "precision-rules")]
    assert config.pythonpath == [str(tmp_path / "src"), str(tmp_path)]
    assert config.baseline == str(tmp_path / "precisionaudit-baseline.json")
    assert config.suppress[0]["module"] == "lm_head"
