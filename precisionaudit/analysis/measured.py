"""Calibration ranges (--data) into node facts: each node's ``CalibrationFacts`` (``calibration``).

PyTorch: the range pass keys every call by ``module|op|k`` (its k-th call of that op in
that module, in forward order); the IR's nodes are numbered the same way here, in the order
the capture added them. The capture and the range pass's target run both follow the
target's control flow, so the target run's values land on the node of the same call; the
fp32 reference's values come keyed by the target run's call they were matched to (none for
a call only the target's program makes: ``stats`` is None there).
ONNX: the range pass keys its statistics by node name, which is the IR's node name.
"""
from ..core.values import call_key
from .facts import CalibrationFacts


def measured_interval(node):
    """(lo, hi) the calibration batches reached at ``node`` (``CalibrationFacts.interval``:
    the program that runs under the target), or None when nothing was measured there. The
    value-range pass uses it where no static bound is known."""
    m = node.get("calibration")
    return None if m is None else m.interval()


def annotate(graph):
    first_bad = set(graph.graph.get("first_nonfinite", {}).values())
    by_name = graph.graph.get("measured_nodes")
    if by_name:
        for name, node in graph.nodes(data=True):
            if name in by_name:
                node["calibration"] = CalibrationFacts(by_name[name], key=name, nonfinite_first=name in first_bad)
        return
    calls = graph.graph.get("measured_calls") or {}
    target_calls = graph.graph.get("measured_target_calls") or {}
    if not calls and not target_calls:
        return
    counts: dict = {}
    for _, node in graph.nodes(data=True):
        key = call_key(node.get("module", ""), node["op"], counts)
        stats, target = calls.get(key), target_calls.get(key)
        if stats is not None or target is not None:
            node["calibration"] = CalibrationFacts(stats, key=key, nonfinite_first=key in first_bad, target=target)
