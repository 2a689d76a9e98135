"""PA304-PA306 on their hazard samples and clean twins (sample_models/), through the model
file entry points check --train reads: get_optimizer, get_loss, get_grad_scaler."""
from __future__ import annotations

import pytest
from conftest import sample

from precisionaudit.check.pytorch.training import train_check_file
from precisionaudit.core.errors import UsageError
from precisionaudit.core.target import Target

SAMPLES = [
    ("PA304", "pa304_norm", Target("bfloat16", "pure"), {"norm"}),
    ("PA305", "pa305_embedding", Target("float16", "pure"), {"emb", "out"}),
    ("PA306", "pa306_no_scaler", Target("float16", "autocast"), {"a", "b"}),
]


@pytest.mark.parametrize("rule,name,target,modules", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_the_hazard_sample_fails_with_its_rule_on_the_right_modules(rule, name, target, modules):
    report = train_check_file(sample(f"{name}_hazard.py"), target, steps=6)
    assert not report.passed
    found = [f for f in report.findings if f.rule == rule]
    assert {f.module for f in found} == modules
    # strict templates: every placeholder of the message and the fix was filled
    assert all("{" not in f.message and "{" not in f.fix["to"] for f in found)
    assert all(f.path.endswith(f"{name}_hazard.py") and f.fingerprint for f in found)


@pytest.mark.parametrize("rule,name,target,modules", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_the_clean_twin_passes_without_findings(rule, name, target, modules):
    report = train_check_file(sample(f"{name}_clean.py"), target, steps=6)
    assert report.passed and not report.findings


def test_get_grad_scaler_must_return_a_grad_scaler_or_none(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(open(sample("pa306_no_scaler_hazard.py")).read().replace(
        "return None  # loss.backward()", "return 65536.0  # loss.backward()"))
    with pytest.raises(UsageError, match="get_grad_scaler\\(\\) returned float; return a torch.amp.GradScaler"):
        train_check_file(str(path), Target("float16", "autocast"), steps=1)


def test_a_report_is_json_ready(tmp_path):
    import json

    report = train_check_file(sample("pa305_embedding_hazard.py"), Target("float16", "pure"), steps=2)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["train"] is True and data["passed"] is False
    assert {f["rule"] for f in data["findings"]} == {"PA305"}
