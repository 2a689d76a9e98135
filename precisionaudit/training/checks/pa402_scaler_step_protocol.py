"""PA402 scaler-step-protocol: the GradScaler's calls out of their order on a path.

Decided at the step walk's events: a ``scaler.step`` after a backward that was not scaled
(``ScalerStep``), a plain ``optimizer.step()`` beside ``scaler.step(optimizer)`` on one
path (``OptimizerStep``), and at the end of a loop iteration (``IterationEnd``) a step not
followed by ``update()``, or ``update()``/``unscale_()`` on the micro-steps of gradient
accumulation that do not step.
"""
from ..registry import training_check
from ..step.events import IterationEnd, OptimizerStep, ScalerStep, step_rule
from ..step.walk import mentions_amp, step_hits

UPDATE_ON_MICRO_STEPS = ("update() runs on micro-steps where scaler.step does not (gradient accumulation): "
                         "the scale changes while gradients accumulate")
UNSCALE_ON_MICRO_STEPS = ("unscale_() runs on micro-steps where scaler.step does not (gradient accumulation): "
                          "gradients are unscaled in place and the next backward adds scaled ones to them")
UNSCALE_WITHOUT_UPDATE = ("unscale_() runs on an iteration that neither steps nor calls update(): the next "
                          "unscale_() raises \"unscale_() has already been called on this optimizer since "
                          "the last update()\"")


@training_check("PA402", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA402")


@step_rule("PA402", ScalerStep, OptimizerStep, IterationEnd)
def scaler_step_protocol(event, report):
    text = report.walker.script.text_of
    if isinstance(event, ScalerStep):
        if event.backward == "plain":
            _report(report, text, event.call,
                    "the backward before it on this path was not scaled, so step() divides unscaled gradients "
                    "by the loss scale", f"call {text(event.receiver)}.scale(loss).backward()")
    elif isinstance(event, OptimizerStep):
        if event.other is not None:
            plain, key = event.other if event.through_scaler else event.call, event.optimizer
            _report(report, text, plain,
                    f"a plain {key}.step() runs beside scaler.step({key}) on the same path: the optimizer steps "
                    "twice, once on gradients still multiplied by the loss scale",
                    f"step {key} only through scaler.step({key})")
    else:
        _iteration_end(event, report, text)


def _iteration_end(event: IterationEnd, report, text):
    if event.backward:
        for node in event.stepped.values():
            _report(report, text, node,
                    "no update() follows this step on this path, so the next iteration's scaler.step raises "
                    "\"step() has already been called since the last update()\"",
                    "call scaler.update() once after every scaler.step(optimizer) of the iteration")
    kinds = [kind for kind, _ in event.marks]
    if not event.stepping or "step" in kinds:
        return
    zeroed = "zero_grad" in kinds  # a skipped step that drops its gradients accumulates nothing
    for i, (kind, node) in enumerate(event.marks):
        if kind == "update" and not zeroed:
            problem = UPDATE_ON_MICRO_STEPS
        elif kind == "unscale_" and not zeroed:
            problem = UNSCALE_ON_MICRO_STEPS
        elif kind == "unscale_" and "update" not in kinds[i + 1:]:
            problem = UNSCALE_WITHOUT_UPDATE
        else:
            continue
        remedy = (f"call {kind}() only on the iterations that call scaler.step" if not zeroed
                  else "call scaler.update() on every iteration that unscaled")
        _report(report, text, node, problem, remedy, drop=event.inner_ifs)


def _report(report, text, node, problem, remedy, drop=frozenset()):
    call = text(node)
    report(node, {"call": call, "problem": problem, "remedy": remedy}, subject=call, drop=drop)
