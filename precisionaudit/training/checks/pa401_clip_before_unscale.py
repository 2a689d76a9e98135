"""PA401 clip-before-unscale: found by the step analysis (``training/step.py``), which walks the
training step's paths once for all the AMP-protocol rules."""
from ..registry import training_check
from ..step import training_hits
from ..step_syntax import mentions_amp


@training_check("PA401", mentions=mentions_amp)
def check(script):
    yield from training_hits(script, "PA401")
