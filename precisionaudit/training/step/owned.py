"""The step when a framework owns it: the walk's reading of the tables in
``training/frameworks``. A call of an owner object (``owners.py``) does to the path what
the table says (a scaled backward leaves scaled gradients pending, an unscale clears them,
a step through the framework's scaler emits the events a ``scaler.step`` does), and the
optimizers it hands back (``Prepared``) step through its scaler.
"""
from __future__ import annotations

import ast
import functools

from ..frameworks import (ACCUMULATES, CLIP, PREPARES, SCALED_BACKWARD, SCALES_LOSS, STEP, UNSCALE, framework_of,
                          step_frameworks)
from ..frameworks.deepspeed import DEEPSPEED
from ..guards import Possible
from ..syntax import argument, key_of, method_of, targets_of
from .events import Backward, Clip, ScalerStep
from .owners import owners, returned_maker
from .paths import Pending
from .values import Prepared


# ----------------------------------------------------------------------------- calls
def on_call(walker, call: ast.Call, p) -> list | None:
    """The paths after a framework call on ``p``; None when ``call`` is none."""
    method = method_of(call)
    if method not in _methods():
        return None
    receiver = call.func.value
    if method == "backward" and method_of(receiver) is not None:  # engine.scale(loss).backward()
        found = owners(walker, receiver.func.value, p)
        api = found[0].value.framework.api(method_of(receiver)) if found else None
        if api is not None and SCALES_LOSS in api.effects:
            return [r for a in found for q in [p.assume(a.guard)] if q is not None
                    for r in _backward(walker, call, a.value, q, receiver)]
    prepared = _prepared(p, receiver)
    if prepared:
        return _optimizer_call(walker, call, method, prepared, p)
    found = owners(walker, receiver, p)
    if not found:
        return None
    api = found[0].value.framework.api(method)
    if api is None:
        return None
    out = []
    for alternative in found:
        q = p.assume(alternative.guard)
        if q is not None:
            out += _apply(walker, call, api, alternative.value, q)
    return out


@functools.cache
def _methods() -> frozenset:
    """Every method name a framework table gives a meaning (a call of any other is none)."""
    return frozenset(m for framework in step_frameworks() for m in (*framework.apis, *framework.optimizer))


@functools.cache
def _preparing() -> frozenset:
    """The method names that hand back optimizers (or, ``deepspeed.initialize``, the owner)."""
    return frozenset(m for framework in step_frameworks() for m, api in framework.apis.items()
                     if PREPARES in api.effects)


def _prepared(p, receiver) -> list:
    key = key_of(receiver)
    return [a for a in p.env.get(key, ()) if isinstance(a.value, Prepared)] if key else []


def _apply(walker, call, api, owner, q) -> list:
    effects = api.effects
    if SCALED_BACKWARD in effects:
        return _backward(walker, call, owner, q)
    if ACCUMULATES in effects:
        return _accumulate(walker, call, owner, q)
    if CLIP in effects and UNSCALE not in effects:
        walker.emit(Clip(call, q.pending, None), q)
    if STEP in effects:
        return _step(walker, call, call.func.value, owner, q)
    if UNSCALE in effects:
        q.pending = None
        if owner.scales:  # accelerate's unscale_gradients is a no-op without its fp16 scaler
            q.marks.append(("unscale_", call))
    return [q]


def _backward(walker, call, owner, q, scaled_loss=None) -> list:
    source = scaled_loss if scaled_loss is not None else call
    scaled = owner if owner.scales else None
    # the framework owns the autocast and the scaler: the loss's own regions are not the
    # user's to scale (PA403/PA404 judge torch's protocol); the region in force still counts
    walker.emit(Backward(call, scaled, frozenset(), q.region), q)
    if scaled is not None:
        q.pending = Pending(owner, call, walker.script.text_of(source.func.value), walker.frames[-1].fn)
        q.backward, q.updated_at = "scaled", None
    elif q.backward != "scaled":
        q.backward = "plain"
    q.iter_backward = True
    return [q]


def _accumulate(walker, call, owner, q) -> list:
    """``with accelerator.accumulate(model):``: a micro-step that syncs and one that does
    not, when the owner accumulates over several."""
    if owner.node is not None and not owner.accumulates:
        return [q]  # made here without accumulation: every micro-step syncs
    atom = f"{walker.script.text_of(call.func.value)}.{owner.framework.sync}"
    return [r for r in (q.assume(frozenset({(atom, True)})), q.assume(frozenset({(atom, False)}))) if r is not None]


def _step(walker, call, receiver, owner, q) -> list:
    if not owner.scales:
        q.pending, q.backward = None, None
        return [q]
    backward = None if q.backward == "plain" and owner.framework.refuses_plain_backward else q.backward
    walker.emit(ScalerStep(call, receiver, backward, owner, q.updated_at), q)
    q.pending, q.backward = None, None
    q.marks += [("step", call), ("update", call)]
    q.stepped = {}
    q.updated_at = call
    return [q]


def _optimizer_call(walker, call, method, prepared, p) -> list:
    out = []
    for alternative in prepared:
        q = p.assume(alternative.guard)
        if q is None:
            continue
        owner, key = alternative.value.owner, alternative.value.key
        api = owner.framework.optimizer.get(method)
        syncing = owner.framework.sync is None or (f"{key}.{owner.framework.sync}", False) not in q.guard
        if api is not None and STEP in api.effects and syncing:
            out += _step(walker, call, call.func.value, owner, q)
            continue
        if method == "zero_grad" and syncing:
            q.marks.append(("zero_grad", call))
        out.append(q)
    return out


# ----------------------------------------------------------------------------- bindings
def prepared_bindings(walker, value, targets, p) -> dict:
    """key -> alternatives for the targets of ``targets = value`` that receive an optimizer
    a framework hands back, or (``engine, optimizer, ... = deepspeed.initialize(...)``) the
    owner; {} when ``value`` is no such call."""
    value = returned_maker(walker.script, value) or value  # made by a helper of this file
    if not isinstance(value, ast.Call) or method_of(value) not in _preparing():
        return {}
    if framework_of(walker.script.names_of(value.func)) is DEEPSPEED and len(targets) == 1 \
            and isinstance(targets[0], (ast.Tuple, ast.List)) and targets[0].elts:
        key = key_of(targets[0].elts[0])
        from .forward import evaluate
        return {key: evaluate(walker.script, value, p)} if key else {}
    method = method_of(value)
    if method is None:
        return {}
    found = owners(walker, value.func.value, p)
    api = found[0].value.framework.api(method) if found else None
    if api is None or PREPARES not in api.effects or _raw_optimizers(value):
        return {}
    key = walker.script.text_of(value.func.value)
    nodes = [t for target in targets for t in targets_of(target)]
    chosen = [n for i, n in enumerate(nodes) if _is_optimizer(value, method, i, n, len(nodes))]
    return {key_of(n): tuple(Possible(Prepared(a.value, key), a.guard) for a in found) for n in chosen if key_of(n)}


def _raw_optimizers(call) -> bool:
    """``self.optimizers(use_pl_optimizer=False)``: the torch optimizers themselves."""
    given = argument(call, "use_pl_optimizer")
    return isinstance(given, ast.Constant) and given.value is False


def _is_optimizer(call, method, i, node, count) -> bool:
    """Whether the ``i``-th of ``count`` targets receives an optimizer."""
    if method in ("optimizers", "setup_optimizers", "prepare_optimizer"):
        return True
    if method == "setup":
        return i > 0  # fabric.setup(model, *optimizers) -> (model, *optimizers)
    if method == "initialize":
        return False
    passed = call.args[i] if i < len(call.args) and count == len(call.args) else None
    words = " ".join(filter(None, (key_of(node), key_of(passed) if passed is not None else None))).lower()
    return "optim" in words or words.split(".")[-1] in ("opt", "opt_g", "opt_d")
