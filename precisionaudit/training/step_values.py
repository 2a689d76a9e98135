"""What a training script's expressions may be worth to the step walk (``step.py``): a
value is a tuple of alternatives ``(guard, value)``, each holding when its guard does. A guard is a frozenset
of literals ``(atom, truth)`` over atoms, the source text of what cannot be known
(``args.fp16``, ``(i + 1) % accum == 0``). ``dtype = torch.float16 if args.fp16 else
torch.bfloat16`` is ``(({("args.fp16", True)}, Dtype("float16")), ({("args.fp16", False)},
Dtype("bfloat16")))``; ``dtype == torch.float16`` is then ``args.fp16`` again.

Pure data and small functions: no LibCST here, so the rules can reason over values alone.
"""
from __future__ import annotations

from dataclasses import dataclass

TRUE_GUARD: frozenset = frozenset()


@dataclass(frozen=True)
class Atom:
    """A value the analysis cannot know, named by its source text."""

    text: str


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
class Table:
    """A dict literal of string keys (``DTYPES = {"fp16": torch.float16, ...}``): each
    key's value alternatives, so ``DTYPES[args.dtype]`` is each entry under its key."""

    entries: tuple


def known(value) -> tuple:
    return ((TRUE_GUARD, value),)


def join(a: frozenset, b: frozenset) -> frozenset | None:
    """Both guards at once; None when they contradict."""
    merged = a | b
    atoms = {atom for atom, _ in merged}
    return merged if len(atoms) == len(merged) else None


def truth(value: tuple) -> list:
    """``value`` as a condition: alternatives ``(guard, bool)``; an unknown atom splits."""
    out = []
    for guard, v in value:
        if isinstance(v, Atom):
            for b in (True, False):
                g = join(guard, frozenset({(v.text, b)}))
                if g is not None:
                    out.append((g, b))
        else:
            out.append((guard, _python_truth(v)))
    return out


def _python_truth(v) -> bool:
    if isinstance(v, (Scaler, Autocast, Dtype)):
        return True
    return bool(v)


def negate(alts: list) -> list:
    return [(g, not b) for g, b in alts]


def combine(left: list, right: list, op) -> list:
    """Alternatives of ``op(l, r)`` over every consistent pair."""
    out = []
    for gl, vl in left:
        for gr, vr in right:
            g = join(gl, gr)
            if g is not None:
                out.append((g, op(vl, vr)))
    return out


def simplify(guards: list) -> frozenset | None:
    """The simplest guard under which one of ``guards`` holds (None: always).

    Two guards that differ only in one literal's truth merge into their common part, until
    nothing merges; the shortest guard left is the condition worth saying."""
    current = {g for g in guards}
    if TRUE_GUARD in current:
        return None
    changed = True
    while changed:
        changed = False
        for a in list(current):
            for b in list(current):
                if a is b or len(a) != len(b):
                    continue
                diff = a ^ b
                if len(diff) == 2 and len({atom for atom, _ in diff}) == 1 and {v for _, v in diff} == {True, False}:
                    common = a & b
                    current -= {a, b}
                    current.add(common)
                    changed = True
                    break
            if changed:
                break
        if TRUE_GUARD in current:
            return None
    return min(current, key=lambda g: (len(g), sorted(map(repr, g)))) if current else None
