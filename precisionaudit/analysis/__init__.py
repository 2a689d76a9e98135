"""Analysis passes: each reads the IR and writes facts into node attributes, nothing else."""
from . import (attention, constants, dtypes, fp8, integers, kernels, measured, norms, phases, ranges, reductions,
               rnn, softmax)

PASSES = (dtypes.annotate, kernels.annotate, constants.annotate, reductions.annotate,
          attention.annotate, norms.annotate, softmax.annotate, rnn.annotate, integers.annotate,
          measured.annotate, ranges.annotate,  # measured ranges stand in for unknown static ones
          phases.annotate, fp8.annotate)


def run_passes(graph):
    for annotate in PASSES:
        annotate(graph)
    return graph
