"""Analysis passes: each reads the IR and writes one typed record of facts (analysis/facts.py)
under its own key of a node's attributes, nothing else.

The passes are imported on first use (they import networkx): the rule engine and the CLI
read ``analysis.facts`` without paying for them.
"""


def _passes() -> tuple:
    from . import (attention, constants, dtypes, fp4, fp4_ranges, fp8, fp8_ranges, integers, kernels, measured, norms,
                   phases, ranges, reductions, rnn, softmax, work)

    return (dtypes.annotate, kernels.annotate, constants.annotate, reductions.annotate,
            attention.annotate, norms.annotate, softmax.annotate, rnn.annotate, integers.annotate,
            measured.annotate, ranges.annotate,  # measured ranges stand in for unknown static ones
            phases.annotate, fp8.annotate, fp8_ranges.annotate, fp4.annotate, fp4_ranges.annotate, work.annotate)


def __getattr__(name):
    if name == "PASSES":
        return _passes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_passes(graph):
    for annotate in _passes():
        annotate(graph)
    return graph
