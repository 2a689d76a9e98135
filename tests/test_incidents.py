"""Issue 25's extended incident set (bench/incidents/): each documented fp16/bf16 failure is
caught at its root-cause op by a value-aware scan (``--data example``) under the target it
happened in, and its fixed twin (the upstream fix) has no warning-or-above finding there.
The root causes and targets are bench/incident_bench.py's table; the bench adds check,
plan and plan --prune."""
import importlib.util
import os
import sys

import pytest

from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location("incident_bench", os.path.join(ROOT, "bench", "incident_bench.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
CAUGHT = [i for i in BENCH.INCIDENT_SET if i.name not in BENCH.MISSED]


def warning_findings(path, incident):
    _, found = scan([path], Target(incident.dtype, incident.mode, "cuda"), load_rules(),
                    values=ValueOptions(data="example"))
    return [f for f in found if f.severity in ("error", "warning")]


def at_root(findings, incident):
    return [f for f in findings if f.module == incident.module and f.op in incident.ops]


@pytest.mark.parametrize("incident", CAUGHT, ids=[i.name for i in CAUGHT])
def test_the_root_cause_is_caught(incident):
    found = warning_findings(incident.path(), incident)
    assert at_root(found, incident), [(f.rule, f.module, f.op) for f in found]


@pytest.mark.parametrize("incident", BENCH.INCIDENT_SET, ids=[i.name for i in BENCH.INCIDENT_SET])
def test_the_fixed_twin_is_clean_there(incident):
    """kvpress's and vLLM's fixes branch on the dtype (``finfo(dtype).max``, a float16-only
    rescale): the range pass must judge the branch the target's program takes."""
    found = warning_findings(incident.path(fixed=True), incident)
    assert not at_root(found, incident), [(f.rule, f.module, f.op, f.message) for f in found]


def test_every_incident_has_its_documented_twin():
    """Each reproduction names its public thread and its upstream fix; each has a fixed twin."""
    for incident in BENCH.INCIDENT_SET:
        with open(incident.path()) as fh:
            header = fh.read().split('"""')[1]
        assert "https://github.com/" in header and "Upstream fix" in header and "Target:" in header
        assert os.path.exists(incident.path(fixed=True))
