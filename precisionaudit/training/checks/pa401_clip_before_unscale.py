"""PA401 clip-before-unscale: gradients clipped while still multiplied by the loss scale.

Decided at each ``Clip`` of the step walk: scaled gradients are pending on the path (a
``scaler.scale(loss).backward()`` with no ``unscale_`` since). The fix inserts
``scaler.unscale_(optimizer)`` before the clip when the optimizer the scaler steps after
it in the same function is known.
"""
from ..registry import training_check
from ..step.events import Clip, step_rule
from ..step.walk import mentions_amp, step_hits


@training_check("PA401", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA401")


@step_rule("PA401", Clip)
def clip_before_unscale(event: Clip, report):
    if event.pending is None:
        return
    clip, scaler = report.walker.script.text_of(event.call.func), event.pending.text
    values = {"clip": clip, "scaler": scaler, "optimizer": event.optimizer or "optimizer"}
    fix = {"autofix": True, "insert": f"{scaler}.unscale_({event.optimizer})"} if event.optimizer else None
    report(event.call, values, subject=clip, fix=fix)
