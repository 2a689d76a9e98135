"""The text report's summary: counted nouns, failed models, what a baseline hid, the next step."""
import os
import re

import pytest
from gate_models import CLEAN, HAZARD, write

from precisionaudit.report.words import plural

BAD = os.path.join(os.path.dirname(__file__), "bad_models")


@pytest.fixture
def project(tmp_path, monkeypatch):
    write(tmp_path, "model.py", HAZARD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _summary(result) -> str:
    """The summary line, its elapsed time shown as (T)."""
    line = next(line for line in result.stdout.splitlines() if line.startswith("found "))
    return re.sub(r" \(\d+\.\d s\)", " (T)", line)


@pytest.mark.parametrize("count, noun, text", [
    (0, "error", "0 errors"), (1, "error", "1 error"), (4, "warning", "4 warnings"),
    (2, "info", "2 info"), (1, "op", "1 op"), (3, "model", "3 models")])
def test_plural(count, noun, text):
    assert plural(count, noun) == text


def test_summary_counts_models_and_names_the_failed_one(project, cli):
    result = cli("scan", "--isolated", "model.py", os.path.join(BAD, "get_model_raises.py"))
    assert result.exit_code == 2
    assert _summary(result) == "found 1 error, 0 warnings, 0 info in 2 models (T); 1 model failed"
    assert "precisionaudit: error: " in result.stderr and "get_model_raises.py" in result.stderr


def test_write_baseline_reports_what_it_wrote_not_zero_findings(project, cli):
    result = cli("scan", "--isolated", "--write-baseline", "base.json", "model.py")
    assert result.exit_code == 0
    assert "wrote 1 finding to base.json" in result.stderr
    assert _summary(result) == ("found 0 errors, 0 warnings, 0 info in 1 model (T); "
                                "1 finding hidden by the baseline base.json")
    again = cli("scan", "--isolated", "--baseline", "base.json", "model.py")
    assert again.exit_code == 0 and "1 finding hidden by the baseline base.json" in _summary(again)


def test_hint_names_the_plan_command_and_it_works(project, cli):
    result = cli("scan", "--isolated", "--mode", "pure", "model.py")
    hint = next(line for line in result.stdout.splitlines() if line.startswith("hint: "))
    # PA107 (-1e9 into fp16); the fused softmax keeps fp32 statistics (SoftMax.cu): no PA101
    assert hint == ("hint: an override plan fixes 1 finding of model.py: "
                    "precisionaudit plan model.py --mode pure -o amp_plan.yaml")
    planned = cli(*hint.split(": precisionaudit ", 1)[1].split(), "--isolated")
    assert planned.exit_code == 0 and "to amp_plan.yaml" in planned.stderr
    assert "masked_fill" in (project / "amp_plan.yaml").read_text()


def test_no_hint_when_nothing_a_plan_fixes(tmp_path, monkeypatch, cli):
    write(tmp_path, "clean.py", CLEAN)
    monkeypatch.chdir(tmp_path)
    result = cli("scan", "--isolated", "clean.py", os.path.join(os.path.dirname(BAD), "..",
                                                               "sample_models", "pa201_gemm_hazard.py"))
    assert "PA201" in result.stdout and "hint:" not in result.stdout  # padding is no plan's job


def test_plan_header_lists_the_findings_it_cannot_fix(tmp_path, cli):
    sample = os.path.join(os.path.dirname(BAD), "..", "sample_models", "pa201_gemm_hazard.py")
    out = tmp_path / "plan.yaml"
    assert cli("plan", "--isolated", sample, "-o", out).exit_code == 0
    header = [line for line in out.read_text().splitlines() if line.startswith("#")]
    assert any("not covered by this plan" in line for line in header)
    assert sum("PA201" in line and "pad to 104" in line for line in header) == 2
