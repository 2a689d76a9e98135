"""The guarantees of issue 11, one named test per defect: no bad input, model code or
signal can corrupt a user's file, hang the tool or forge its verdict."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from conftest import ROOT, sample

from precisionaudit.cli import main

HAZARD = sample("pa101_softmax_hazard.py")
CLEAN = sample("pa111_output_clean.py")


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        result.exception
    return result


def one_error_line(result, expected, code=2):
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert lines and lines[-1].startswith("precisionaudit: error:") and expected in lines[-1], lines
    assert "Traceback" not in result.stderr


def digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(open(HAZARD, "rb").read())
    return path


def write_model(tmp_path, body, name="m.py"):
    path = tmp_path / name
    path.write_text("import sys\nimport torch\n" + textwrap.dedent(body))
    return path


# --------------------------------------------------------------------------- 1. data loss
@pytest.mark.parametrize("args", [["plan", "{m}", "-o", "{m}"], ["scan", "{m}", "--write-baseline", "{m}"]],
                         ids=["plan -o model", "scan --write-baseline model"])
def test_an_output_that_is_an_input_is_refused(model, args):
    before = digest(model)
    result = run(*[a.format(m=model) for a in args])
    one_error_line(result, "which this command reads")
    assert digest(model) == before


def test_an_output_through_a_symlink_or_hard_link_to_the_model_is_refused(model, tmp_path):
    os.symlink(model, tmp_path / "link.yaml")
    os.link(model, tmp_path / "hard.yaml")
    before = digest(model)
    for name in ("link.yaml", "hard.yaml"):
        one_error_line(run("plan", model, "-o", tmp_path / name), "which this command reads")
    assert digest(model) == before and os.path.islink(tmp_path / "link.yaml")


@pytest.mark.parametrize("kind", ["device", "symlink to device", "fifo", "directory"])
def test_a_non_regular_output_is_refused(model, tmp_path, kind):
    target = tmp_path / "out"
    if kind == "device":
        target = "/dev/null"
    elif kind == "symlink to device":
        os.symlink("/dev/null", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    for args in (["plan", model, "-o", target], ["scan", model, "--write-baseline", target]):
        one_error_line(run(*args), "directory" if kind == "directory" else "not a regular file")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    if kind == "symlink to device":
        assert os.readlink(target) == "/dev/null"


def test_the_baseline_named_in_the_settings_can_be_rewritten(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.precisionaudit]\nbaseline = "base.json"\n')
    (tmp_path / "base.json").write_text("{}")
    result = run("scan", model, "--write-baseline", "base.json")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "base.json").read_text())["tool"] == "precisionaudit"
    one_error_line(run("scan", model, "--write-baseline", "pyproject.toml"), "which this command reads")


def test_an_output_into_a_missing_folder_is_one_line(model, tmp_path):
    one_error_line(run("plan", model, "-o", tmp_path / "nope" / "plan.yaml"), "does not exist")


def test_a_plan_written_through_a_symlink_keeps_the_link(model, tmp_path):
    (tmp_path / "real.yaml").write_text("old")
    os.symlink(tmp_path / "real.yaml", tmp_path / "plan.yaml")
    result = run("plan", model, "-o", tmp_path / "plan.yaml")
    assert result.exit_code == 0, result.stderr
    assert os.path.islink(tmp_path / "plan.yaml") and "overrides" in (tmp_path / "real.yaml").read_text()
