"""Measured ranges (--data) stand in for the static value-range pass's 'unknown': the
interval the batches reached becomes the node's value_range, and the static rules judge it."""
import json

import torch

from click.testing import CliRunner
from conftest import sample

from precisionaudit.analysis import run_passes
from precisionaudit.cli import main
from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.frontend import frontend_for
from precisionaudit.runtime.sources import DEFAULT_LOAD

PA105 = sample("pa105_exp_hazard.py")
PURE = Target("float16", "pure", "cuda")


def _graph(values=None):
    frontend = frontend_for(PA105)
    captured = frontend.capture(PA105, PURE, DEFAULT_LOAD)
    if values is not None:
        frontend.measure(captured.graph, PA105, PURE, DEFAULT_LOAD, values)
    return run_passes(captured.graph)


def _node(graph, op):
    return next(attrs for _, attrs in graph.nodes(data=True) if attrs["op"] == op)


def test_a_gemm_output_is_unknown_without_data_and_measured_with_it():
    assert _node(_graph(), "linear")["range"].value_range is None
    linear = _node(_graph(ValueOptions(data="example")), "linear")
    lo, hi = linear["range"].value_range
    assert linear["range"].source == "measured"
    # the values of the program that runs: the fp16 run's (each end an fp16 value), and no
    # fp32 reference on a batch that comes nowhere near fp16's max
    measured = linear["calibration"].target
    assert (lo, hi) == (measured["lo"], measured["hi"])
    assert lo < 0 < hi and max(-lo, hi) == measured["max_abs"]
    assert [float(torch.tensor(v).half()) for v in (lo, hi)] == [lo, hi]
    assert linear["calibration"].stats is None


def test_the_static_pass_propagates_from_the_measured_range():
    """exp's range is computed from the measured argument (not measured itself), its ends
    stored in the op's fp16 output."""
    import math

    import torch

    graph = _graph(ValueOptions(data="example"))
    lo, hi = _node(graph, "linear")["range"].value_range
    exp = _node(graph, "exp")["range"]
    assert exp.source == "static"
    stored = torch.tensor([math.exp(lo), math.exp(hi)], dtype=torch.float64).half().double().tolist()
    assert exp.value_range == tuple(stored)


def _pa105(*extra):
    result = CliRunner().invoke(main, ["scan", PA105, "--mode", "pure", "--format", "json",
                                       "--select", "PA105", *extra])
    return json.loads(result.stdout)["findings"]


def test_pa105_judges_the_measured_argument():
    """Static: exp of a GEMM output may overflow. On the data its argument stays far below
    11.09, so exp fits fp16 and PA105 is silent."""
    assert [f["rule"] for f in _pa105()] == ["PA105"]
    assert _pa105("--data", "example") == []
