"""What the walk of a training step tells the rules: typed events at each AMP call, each
on one path (its guard), and the registry of the rules that decide on them.

A step rule is one function in its own ``training/checks/paNNN_*.py``, registered with
``@step_rule("PA401", Clip)``: the walk calls it with each event of those types and a
``report`` that records a finding at a node on the event's path (the walk words the path's
condition). The rule holds its predicate, its message values and its fix; the walk holds
only where the protocol stands.
"""
from __future__ import annotations

from dataclasses import dataclass

#: event type -> [(rule id, decide(event, report))]
STEP_RULES: dict = {}


def step_rule(rule_id: str, *events):
    """Register the decorated ``decide(event, report)`` for events of the given types."""
    def register(fn):
        for event in events:
            STEP_RULES.setdefault(event, []).append((rule_id, fn))
        return fn

    return register


@dataclass(frozen=True)
class Backward:
    """``loss.backward()`` or ``scaler.scale(loss).backward()``, on one path.

    ``scaler``: the enabled scaler that scaled it (None: a plain backward); ``regions``: the
    enabled autocast regions the loss was computed under; ``region``: the one in force at
    the backward itself (None: none)."""

    call: object
    scaler: object
    regions: frozenset
    region: object

    @property
    def scaled(self) -> bool:
        return self.scaler is not None


@dataclass(frozen=True)
class Clip:
    """A ``clip_grad_norm_``/``clip_grad_value_`` call. ``pending``: the scaled gradients
    not unscaled on this path (``paths.Pending``; None: none); ``optimizer``: the one
    optimizer the scaler steps after the clip in the same function (None: none or several)."""

    call: object
    pending: object
    optimizer: str | None


@dataclass(frozen=True)
class ScalerStep:
    """``scaler.step(optimizer)`` of an enabled scaler, or a step a framework runs through
    its scaler (``owner``: the ``values.Owner``; None for torch's). ``backward``: the kind of
    the last backward on this path since a step ("plain", "scaled" or None); ``stale``: the
    ``update()`` (or the framework step that updated) after the last scaled backward, so the
    gradients this step unscales were scaled with the scale before it (None: none)."""

    call: object
    receiver: object
    backward: str | None
    owner: object = None
    stale: object = None


@dataclass(frozen=True)
class OptimizerStep:
    """A step of ``optimizer`` (a plain ``optimizer.step()`` when ``call`` is not through
    the scaler); ``other``: the step of the other kind of the same optimizer already on
    this path (None: none)."""

    call: object
    optimizer: str
    through_scaler: bool
    other: object


@dataclass(frozen=True)
class IterationEnd:
    """The end of one loop iteration on one path. ``stepped``: optimizer -> the
    ``scaler.step`` not followed by ``update()``; ``backward``: a backward ran in the
    iteration; ``marks``: (kind, call) of the scaler calls and ``zero_grad`` of the
    iteration, in order; ``stepping``: some path of the iteration calls ``scaler.step``;
    ``inner_ifs``: the ids of the ifs inside the loop (a condition they make goes unsaid
    where a rule judges the iteration as a whole)."""

    loop: object
    stepped: dict
    backward: bool
    marks: tuple
    stepping: bool
    inner_ifs: frozenset


@dataclass
class Hit:
    """One place a rule fires, over every path that reaches it."""

    rule: str
    node: object
    values: dict
    subject: str | None
    scope: str
    fix: dict | None
    guards: list
