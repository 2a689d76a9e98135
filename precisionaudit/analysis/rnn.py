"""RNN state: the dtype the recurrence carries, and over how many steps.

nn.LSTM/GRU/RNN and their cells carry it by construction. A hand-written recurrence (a
gated linear RNN or a state-space scan written as a loop: ``h = a * h + u``) shows in the
IR as a chain of ops at one source line, each step's output feeding the next step's op at
that line; the last op of the chain carries an ``RnnFacts`` (analysis/facts.py) under ``rnn``:
``steps`` (the chain's length) and ``state_dtype`` (the dtype it stores the state in).
"""
from collections import defaultdict

from ..ir.graph import numel
from .facts import RnnFacts

RNN_OPS = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
CELL_OPS = {"lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"}
#: elementwise ops a hand-written recurrence updates its state with
STEP_OPS = {"add", "sub", "mul", "addcmul", "lerp"}


def annotate(graph):
    for _, node in graph.nodes(data=True):
        if node["op"] in RNN_OPS:
            shape = node["in_shapes"][0] if node["in_shapes"] else None
            known = shape and len(shape) >= 2 and numel(shape[:2])
            node["rnn"] = RnnFacts(node["compute_dtype"], steps=max(shape[:2]) if known else None)
        elif node["op"] in CELL_OPS:
            node["rnn"] = RnnFacts(node["compute_dtype"])
    for name, steps in _recurrence_ends(graph):
        node = graph.nodes[name]
        node["rnn"] = RnnFacts(node["out_dtype"], steps=steps)


def _recurrence_ends(graph):
    """(last op, steps) of the longest chain of state updates at each source line."""
    by_site = defaultdict(list)
    for name, node in graph.nodes(data=True):  # nodes are in execution order
        if node["op"] in STEP_OPS and node["line"] is not None:
            by_site[(node["file"], node["line"], node["op"])].append(name)
    best = {}  # (file, line) → (steps, order, name)
    order = {name: i for i, name in enumerate(graph.nodes)}
    for (file, line, _), names in by_site.items():
        if len(names) < 2:
            continue
        members, steps = set(names), {}
        for name in names:
            prev = _previous_step(graph, name, members, (file, line))
            steps[name] = steps[prev] + 1 if prev in steps else 1
        end = max(names, key=lambda n: (steps[n], order[n]))
        candidate = (steps[end], order[end], end)
        if steps[end] > 1 and candidate > best.get((file, line), (0, -1, None)):
            best[(file, line)] = candidate
    return [(name, steps) for steps, _, name in best.values()]


def _previous_step(graph, name, members, site, depth=3):
    """The member of ``members`` this op's inputs come from through ops at the same line."""
    frontier = list(graph.predecessors(name))
    for _ in range(depth):
        following = []
        for p in frontier:
            if p in members:
                return p
            node = graph.nodes[p]
            if (node["file"], node["line"]) == site:
                following.extend(graph.predecessors(p))
        frontier = following
    return None
