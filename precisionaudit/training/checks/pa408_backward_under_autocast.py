"""PA408 backward-under-autocast: ``backward()`` called inside an enabled autocast region.
Decided at each ``Backward`` of the step walk."""
from ..registry import training_check
from ..step.events import Backward, step_rule
from ..step.walk import mentions_amp, step_hits


@training_check("PA408", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA408")


@step_rule("PA408", Backward)
def backward_under_autocast(event: Backward, report):
    if event.region is None:
        return
    text = report.walker.script.text_of
    backward = text(event.call.func)
    report(event.call, {"backward": backward, "autocast": text(event.region.node)}, subject=backward)
