"""PA104 rnn-state-low-precision: an LSTM/GRU/RNN, or a recurrence written as a loop,
carries its state in fp16/bf16.
"""
from __future__ import annotations

from ...analysis.rnn import STEP_OPS
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ..registry import Hit, check, param


@check
def rnn_state_low_precision(graph, name, node, target):
    """nn.LSTM/GRU/RNN (any length), and hand-written recurrences over min_steps or more."""
    rnn = node.get("rnn")
    if node["op"] in STEP_OPS:
        if rnn is None or rnn.steps is None or rnn.steps < param("min_steps") or rnn.state_dtype not in LOW:
            return None
        return Hit(name, {"steps": rnn.steps, "dtype": rnn.state_dtype})
    return Hit(name, {"steps": rnn.steps if rnn else None})
