"""PA403 fp16-without-loss-scaling: a backward of a loss computed under fp16 autocast that
no enabled GradScaler scaled. Decided at each ``Backward`` of the step walk. Not where a
framework that refuses a plain backward under fp16 owns the step on the path (DeepSpeed
raises "Loss scaling is required ..."; ``frameworks.Framework.refuses_plain_backward``)."""
from ..registry import training_check
from ..step.events import Backward, step_rule
from ..step.values import Owner
from ..step.walk import mentions_amp, step_hits


def _refused(path) -> bool:
    return any(isinstance(a.value, Owner) and a.value.framework.refuses_plain_backward
               for alternatives in path.env.values() for a in alternatives)


@training_check("PA403", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA403")


@step_rule("PA403", Backward)
def fp16_without_loss_scaling(event: Backward, report):
    fp16 = [r for r in event.regions if r.dtype == "float16"]
    if not fp16 or event.scaled or _refused(report.path):
        return
    text = report.walker.script.text_of
    region = min(fp16, key=lambda r: (r.node.lineno, r.node.col_offset))
    backward = text(event.call.func)
    report(event.call, {"backward": backward, "autocast": text(region.node)}, subject=backward)
