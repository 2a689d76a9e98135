"""PA404 scaler-under-bf16: a GradScaler scales a loss computed only under bf16 autocast,
where no loss scaling is needed. Decided at each scaled ``Backward`` of the step walk,
reported at the scaler's construction."""
from ..registry import training_check
from ..step.events import Backward, step_rule
from ..step.values import Scaler
from ..step.walk import mentions_amp, step_hits


@training_check("PA404", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA404")


@step_rule("PA404", Backward)
def scaler_under_bf16(event: Backward, report):
    made = event.scaler.node if isinstance(event.scaler, Scaler) else None  # a framework's scaler: not made here
    if made is None or not event.regions or any(r.dtype != "bfloat16" for r in event.regions):
        return
    text = report.walker.script.text_of
    region = min(event.regions, key=lambda r: (r.node.lineno, r.node.col_offset))
    scaler = text(made.func)
    report(made, {"scaler": scaler, "autocast": text(region.node)}, subject=scaler)
