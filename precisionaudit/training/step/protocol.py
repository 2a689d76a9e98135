"""The AMP protocol's calls on one path of the walk: what each one changes in the path
(scaled gradients pending, the last backward's kind, the optimizers stepped) and the event
it emits for the step rules. Where the protocol stands is kept here; whether that is a
hazard is each rule's to decide (``training/checks``).
"""
from __future__ import annotations

import ast

from ..guards import Atom, Possible
from ..syntax import CLIPS, FUNCTIONS, key_of, method_of
from . import owned
from .events import Backward, Clip, IterationEnd, OptimizerStep, ScalerStep
from .forward import scalers
from .owners import in_play
from .paths import Pending


def on_call(walker, call: ast.Call, p) -> list:
    """The paths after ``call`` ran on ``p`` (a scaler known only under guards splits it);
    a framework's call is the framework's table's to say (``owned.on_call``)."""
    if in_play(walker.script):
        handled = owned.on_call(walker, call, p)
        if handled is not None:
            return handled
    method = method_of(call)
    if walker.script.names_of(call.func) & CLIPS:
        return _clip(walker, call, p)
    if method == "backward" and not any(not isinstance(a, ast.Starred) for a in call.args):
        return _backward(walker, call, p)
    if method == "zero_grad":
        p.marks.append(("zero_grad", call))
        return [p]
    if method not in ("unscale_", "step", "update"):
        return [p]
    receiver = call.func.value
    found = scalers(walker.script, receiver, p)
    if found:
        return _scaler_call(walker, method, call, receiver, found, p)
    if method == "step" and not call.args and not call.keywords:
        key = key_of(receiver)
        if key in walker.optimizer_keys:
            walker.emit(OptimizerStep(call, key, False, p.scaler_opts.get(key)), p)
            p.plain_steps[key] = call
    return [p]


def _scaler_call(walker, method, call, receiver, found, p) -> list:
    out = []
    for alternative in found:
        q = p.assume(alternative.guard)
        if q is None:
            continue
        out.append(q)
        if not alternative.value.enabled:  # a disabled scaler's step is optimizer.step(); the rest no-ops
            if method == "step":
                q.pending, q.backward = None, None
            continue
        if method == "unscale_":
            q.pending = None
        elif method == "step":
            stepped = call.args or [k.value for k in call.keywords]
            optimizer = key_of(stepped[0]) if stepped else None
            walker.emit(ScalerStep(call, receiver, q.backward, stale=q.updated_at), q)
            if optimizer is not None:
                walker.emit(OptimizerStep(call, optimizer, True, q.plain_steps.get(optimizer)), q)
                q.stepped[optimizer] = call
                q.scaler_opts[optimizer] = call
            q.pending, q.backward = None, None
        elif method == "update":
            q.stepped = {}
            q.updated_at = call
        q.marks.append((method, call))
    return out


#: torch's ``OptState.UNSCALED``, the stage ``GradScaler.unscale_`` records for an optimizer
#: (torch/amp/grad_scaler.py ``unscale_``: ``optimizer_state["stage"] = OptState.UNSCALED``,
#: kept until ``update()``), however imported
UNSCALED_STAGES = frozenset({"torch.amp.grad_scaler.OptState.UNSCALED", "torch.cuda.amp.grad_scaler.OptState.UNSCALED"})


def unscaled_when(script, test) -> bool | None:
    """The truth of ``test`` on which the gradients are already unscaled, where ``test``
    compares an optimizer's GradScaler stage with ``OptState.UNSCALED``
    (``if state["stage"] is not OptState.UNSCALED: scaler.unscale_(opt)``, allennlp's
    guard against unscaling twice): False for ``is not`` / ``!=``, True for ``is`` / ``==``;
    None for any other test."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 \
            or not isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
        return None
    if not any(script.names_of(side) & UNSCALED_STAGES for side in (test.left, test.comparators[0])):
        return None
    return isinstance(test.ops[0], (ast.Is, ast.Eq))


def _clip(walker, call, p) -> list:
    optimizer = None
    if p.pending is not None and p.pending.fn is walker.frames[-1].fn:
        optimizer = _optimizer_after(walker, call, p.pending.text)
    walker.emit(Clip(call, p.pending, optimizer), p)
    return [p]


def _optimizer_after(walker, clip, scaler_text) -> str | None:
    """The one optimizer ``scaler_text.step(...)`` steps after ``clip`` in the same
    function (None: none or several): what the inserted ``unscale_`` must name."""
    fn = walker.frames[-1].fn
    if fn is None:
        return None
    loop = _loop_of(walker, clip)
    found = set()
    for node in walker.calls.calls_in(fn.body):
        stepped = [*node.args, *(k.value for k in node.keywords)]
        if method_of(node) == "step" and len(stepped) == 1 and key_of(node.func.value) == scaler_text \
                and node.lineno > clip.lineno and _loop_of(walker, node) is loop:
            found.add(walker.script.text_of(stepped[0]))
    return found.pop() if len(found) == 1 else None


def _loop_of(walker, node):
    """The innermost loop around ``node`` (a step in a nested ``for opt in opts:`` does not
    name the optimizer at the clip)."""
    parents = walker.index.parents
    current = parents.get(node)
    while current is not None and not isinstance(current, (ast.For, ast.AsyncFor, ast.While, *FUNCTIONS)):
        current = parents.get(current)
    return current


def _backward(walker, call, p) -> list:
    receiver = call.func.value
    if method_of(receiver) == "scale" and (receiver.args or receiver.keywords):
        found = scalers(walker.script, receiver.func.value, p)
        loss = receiver.args[0] if receiver.args else receiver.keywords[0].value
        text = walker.script.text_of(receiver.func.value)
    else:
        found, loss, text = [], receiver, None
        key = key_of(receiver)
        if key and any(isinstance(a.value, Atom) and a.value.text == "__scaled__" for a in p.env.get(key, ())):
            return [p]  # apex's ``with amp.scale_loss(loss, opt) as scaled:``
    out = []
    for alternative in found or [Possible(None)]:
        q = p.assume(alternative.guard)
        if q is None:
            continue
        scaler = alternative.value
        scaled = scaler is not None and scaler.enabled
        walker.emit(Backward(call, scaler if scaled else None, walker.prov(loss, q), q.region), q)
        if scaled:
            q.pending = Pending(scaler, receiver, text, walker.frames[-1].fn)
            q.backward, q.updated_at = "scaled", None
        elif q.backward != "scaled":
            q.backward = "plain"
        q.iter_backward = True
        out.append(q)
    return out


def iteration_end(walker, loop, body, inner_ifs: frozenset):
    """One ``IterationEnd`` per path that finishes the iteration (not by return/raise)."""
    ended = [q for q in body if q.ended in (None, "continue")]
    stepping = any(kind == "step" for q in ended for kind, _ in q.marks)
    for q in ended:
        walker.emit(IterationEnd(loop, dict(q.stepped), q.iter_backward, tuple(q.marks), stepping, inner_ifs), q)
