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
    if node["op"] in STEP_OPS:
        steps = node.get("rnn_steps")
        if steps is None or steps < param("min_steps") or node.get("rnn_state_dtype") not in LOW:
            return None
        return Hit(name, {"steps": steps, "dtype": node["rnn_state_dtype"]})
    return Hit(name, {"steps": node.get("rnn_steps")})
