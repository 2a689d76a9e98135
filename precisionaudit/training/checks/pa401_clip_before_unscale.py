"""PA401 clip-before-unscale: gradients clipped while still multiplied by the loss scale.

Decided at each ``Clip`` of the step walk: scaled gradients are pending on the path (a
``scaler.scale(loss).backward()`` with no ``unscale_`` since, or a framework's scaled
backward, ``self.manual_backward(loss)`` / ``accelerator.backward(loss)`` /
``engine.backward(loss)``, before the step that unscales them). The message names the
framework call and what to call instead (the framework's table, ``training/frameworks``).

Fixes: ``scaler.unscale_(optimizer)`` inserted before the clip when the optimizer the
scaler steps after it in the same function is known; under accelerate, torch's
``clip_grad_norm_``/``clip_grad_value_`` becomes ``accelerator.clip_grad_norm_``/
``clip_grad_value_`` (same arguments; it unscales first) where the accelerator is named in
the same function and no accumulation micro-step reaches the clip.
"""
from ..registry import training_check
from ..step.events import Clip, step_rule
from ..step.values import Owner
from ..step.walk import mentions_amp, step_hits

#: torch clips accelerate has a method for, with the same arguments
ACCELERATE_CLIPS = ("clip_grad_norm_", "clip_grad_value_")


@training_check("PA401", mentions=mentions_amp)
def check(script):
    yield from step_hits(script, "PA401")


@step_rule("PA401", Clip)
def clip_before_unscale(event: Clip, report):
    if event.pending is None:
        return
    text = report.walker.script.text_of
    clip = text(event.call.func)
    if isinstance(event.pending.scaler, Owner):
        _framework_clip(event, report, clip)
        return
    scaler = event.pending.text
    values = {"clip": clip, "after": "", "of": f" of {scaler}",
              "problem": f"no {scaler}.unscale_(...) runs before it on this path, so the threshold is compared "
                         "with scaled gradients",
              "remedy": f"call {scaler}.unscale_({event.optimizer or 'optimizer'}) right before {clip}"}
    fix = {"autofix": True, "insert": f"{scaler}.unscale_({event.optimizer})"} if event.optimizer else None
    report(event.call, values, subject=clip, fix=fix)


def _framework_clip(event: Clip, report, clip):
    walker = report.walker
    owner, pending = event.pending.scaler, event.pending
    framework = owner.framework
    backward = " ".join(walker.script.text_of(pending.backward).split())
    # a clip imported by name (``from torch.nn.utils import clip_grad_norm_``) has no attribute
    own_clip = getattr(event.call.func, "attr", None) == "clip_gradients" and clip.startswith("self.")
    problem = (f"in manual optimization {clip} clips the gradients as they are (MixedPrecision.clip_gradients "
               f"calls no unscale_; Lightning #18089), and {framework.title} unscales them only "
               f"{framework.unscales_in}, after it" if own_clip else
               f"{framework.title} unscales them only {framework.unscales_in}, after this clip")
    values = {"clip": clip, "after": f" after {backward[:80]} under {framework.setting(owner.precision)}", "of": "",
              "problem": problem + ", so the threshold is compared with scaled gradients",
              "remedy": framework.remedy["PA401"]}
    report(event.call, values, subject=clip, fix=_accelerate_fix(event, report, pending, clip))


def _accelerate_fix(event, report, pending, clip):
    """``accelerator.clip_grad_norm_`` in place of torch's, where that is the same call
    made safe: accelerate's, the accelerator named in this function, no micro-step."""
    owner, walker = pending.scaler, report.walker
    method = clip.rsplit(".", 1)[-1]
    if owner.framework.name != "accelerate" or method not in ACCELERATE_CLIPS or pending.fn is not walker.frames[-1].fn:
        return None
    synced = (f"{pending.text}.{owner.framework.sync}", True) in report.path.guard
    if owner.node is None or owner.accumulates and not synced:
        return None
    return {"autofix": True, "replace": f"{pending.text}.{method}"}
