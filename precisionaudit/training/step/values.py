"""What the forward walk knows a training script's names hold on one path: alternatives
``guards.Possible(value, guard)``, the values being torch things the AMP protocol turns on
(a dtype, a GradScaler, an autocast context, a dict of dtypes) or an ``Atom`` for what
cannot be known, so that a test on it splits the path.

``dtype = torch.float16 if args.fp16 else torch.bfloat16`` is
``(Possible(Dtype("float16"), {("args.fp16", True)}), Possible(Dtype("bfloat16"), {("args.fp16", False)}))``;
``dtype == torch.float16`` is then ``args.fp16`` again.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..guards import Atom, Possible, join


@dataclass(frozen=True)
class Dtype:
    """A torch floating-point dtype: ``float16``, ``bfloat16``, ``float32``."""

    name: str


@dataclass(frozen=True)
class Scaler:
    """A GradScaler object: where it was made (None: made elsewhere, a parameter) and
    whether it is enabled on this alternative."""

    node: object
    enabled: bool
    text: str = "scaler"


@dataclass(frozen=True)
class Autocast:
    """An autocast context object: its dtype (None when it cannot be known) and whether
    it is enabled on this alternative."""

    node: object
    dtype: str | None
    enabled: bool


@dataclass(frozen=True)
class Owner:
    """An object a framework owns the step through (an ``Accelerator``, a DeepSpeed engine,
    a Fabric, a LightningModule's ``self``): its table (``frameworks.Framework``), where it
    was made (None: elsewhere), whether its loss is scaled on this alternative, the
    precision as the code spells it (None: unknown), and whether its ``accumulate()``
    context steps on some micro-steps only."""

    framework: object
    node: object
    scales: bool
    precision: object = None
    accumulates: bool = False


@dataclass(frozen=True)
class Prepared:
    """An optimizer a framework handed back (``accelerator.prepare``, ``self.optimizers()``,
    ``fabric.setup``): its ``step()`` goes through the framework's loss scaler. ``key``:
    the owner as the code names it (``accelerator``), whose sync attribute decides."""

    owner: Owner
    key: str


@dataclass(frozen=True)
class Table:
    """A dict literal of string keys (``DTYPES = {"fp16": torch.float16, ...}``): each
    key's value alternatives, so ``DTYPES[args.dtype]`` is each entry under its key."""

    entries: tuple


def truth(alternatives) -> list:
    """``alternatives`` as a condition: Possible(bool, guard) each; an unknown atom splits."""
    out = []
    for p in alternatives:
        if isinstance(p.value, Atom):
            for b in (True, False):
                g = join(p.guard, frozenset({(p.value.text, b)}))
                if g is not None:
                    out.append(Possible(b, g))
        else:
            objects = (Scaler, Autocast, Dtype, Owner, Prepared)
            out.append(Possible(True if isinstance(p.value, objects) else bool(p.value), p.guard))
    return out


def negate(alternatives) -> list:
    return [Possible(not p.value, p.guard) for p in alternatives]


def combine(left, right, op) -> list:
    """Alternatives of ``op(l, r)`` over every consistent pair."""
    out = []
    for a in left:
        for b in right:
            g = join(a.guard, b.guard)
            if g is not None:
                out.append(Possible(op(a.value, b.value), g))
    return out
