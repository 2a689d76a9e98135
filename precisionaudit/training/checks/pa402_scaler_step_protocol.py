"""PA402 scaler-step-protocol: the GradScaler's calls out of their order on a path.

Decided at the step walk's events: a ``scaler.step`` after a backward that was not scaled
(``ScalerStep``), or of gradients scaled before an ``update()`` changed the scale (one
scaler, several optimizers: ``update()`` between one's step and another's), a plain
``optimizer.step()`` beside ``scaler.step(optimizer)`` on one path (``OptimizerStep``), and
at the end of a loop iteration (``IterationEnd``) a step not followed by ``update()``, or
``update()``/``unscale_()`` on the micro-steps of gradient accumulation that do not step.
A framework's step through its scaler counts as ``scaler.step`` plus ``update()`` (a
LightningModule's ``opt.step()``, accelerate's prepared ``optimizer.step()``), and its
clip that unscales (``accelerator.clip_grad_norm_``) as ``unscale_()``: the message then
names the framework call (``training/frameworks``).
"""
from ..frameworks import SCALED_BACKWARD, UNSCALE, step_frameworks
from ..registry import training_check
from ..step.events import IterationEnd, OptimizerStep, ScalerStep, step_rule
from ..step.walk import mentions_amp, step_hits
from ..syntax import method_of

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
            _report(report, text, event.call, *_plain_backward(event, text))
        elif event.stale is not None:
            _report(report, text, event.call, *_stale(event, text))
    elif isinstance(event, OptimizerStep):
        if event.other is not None:
            plain, key = event.other if event.through_scaler else event.call, event.optimizer
            _report(report, text, plain,
                    f"a plain {key}.step() runs beside scaler.step({key}) on the same path: the optimizer steps "
                    "twice, once on gradients still multiplied by the loss scale",
                    f"step {key} only through scaler.step({key})")
    else:
        _iteration_end(event, report, text)


def _plain_backward(event, text) -> tuple:
    if event.owner is None:
        return ("the backward before it on this path was not scaled, so step() divides unscaled gradients "
                "by the loss scale", f"call {text(event.receiver)}.scale(loss).backward()")
    framework = event.owner.framework
    return (f"it steps through {framework.title}'s loss scaler under {framework.setting(event.owner.precision)} "
            f"({(framework.optimizer.get('step') or framework.api('step')).source.split(' -> ')[-1]}), but the "
            "backward before it on this path "
            "was a plain backward, not the framework's scaled one: the unscale divides gradients that were never "
            "multiplied by the loss scale, so every update shrinks by the scale (65536 at the start)",
            framework.remedy["PA402"])


def _stale(event, text) -> tuple:
    update = " ".join(text(event.stale).split())
    problem = (f"the gradients it unscales were scaled before {update} updated the loss scale, so they are "
               "divided by another scale than the one they were multiplied by (one scaler's update() must run "
               "once per iteration, after every optimizer that steps has stepped)")
    if event.owner is None:
        return problem, "call update() once, after the last scaler.step(...) of the iteration"
    return (f"{problem}; {event.owner.framework.title}'s optimizer.step() updates the scale each time",
            "run each loss's backward right before its own optimizer's step()")


def _framework_unscale(node, text, guard) -> tuple | None:
    """(problem, remedy) for an unscale a framework's clip makes on a micro-step that does
    not sync (``guard``: the path's); None for any other unscale."""
    method = method_of(node)
    for framework in step_frameworks():
        api = framework.api(method) if framework.sync else None
        if api is not None and UNSCALE in api.effects and SCALED_BACKWARD not in api.effects:
            owner = text(node.func.value)
            if (f"{owner}.{framework.sync}", False) not in guard:
                return ()  # it syncs here: the optimizer steps, or not, as its own code says
            return (f"it unscales the gradients on every call ({api.source.split(' ', 1)[-1]}), but inside "
                    f"{owner}.accumulate(...) the optimizer steps only when {owner}.{framework.sync} is true: on "
                    "the micro-steps in between the gradients are unscaled in place, the next backward adds scaled "
                    "ones to them, and the next unscale_ raises \"unscale_() has already been called on this "
                    "optimizer since the last update()\"",
                    framework.remedy["PA402"].replace("accelerator.", f"{owner}."))
    return None


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
        framework = _framework_unscale(node, text, report.path.guard) \
            if kind == "unscale_" and method_of(node) != "unscale_" else None
        if framework is not None:
            if framework:
                _report(report, text, node, *framework, drop=event.inner_ifs)
            continue
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
