"""RNN state: the dtype the recurrence carries, and over how many steps."""
RNN_OPS = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
CELL_OPS = {"lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"}


def annotate(graph):
    for _, node in graph.nodes(data=True):
        if node["op"] in RNN_OPS:
            node["rnn_state_dtype"] = node["compute_dtype"]
            shape = node["in_shapes"][0] if node["in_shapes"] else None
            node["rnn_steps"] = max(shape[:2]) if shape and len(shape) >= 2 else None
        elif node["op"] in CELL_OPS:
            node["rnn_state_dtype"] = node["compute_dtype"]
