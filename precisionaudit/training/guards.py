"""The training stage's one value model: a ``Possible`` value of an expression and the
``Guard`` under which it holds, and the one way a guard is said in words.

A guard is a frozenset of literals ``(atom, value)``: the atom is the source text of what
the analysis cannot know (``args.fp16``, ``(i + 1) % accum == 0``), the value its truth
(or, for a table key, the key it equals). That an unknown equals a constant is said by
``equals``: ``x == "fp16"`` true is the keyed literal ``("x ==", "fp16")`` with the truth of
``x == 'fp16'``, false only the latter, so that ``x == "fp16"`` and ``x == "bf16"`` never
hold on one path while ``x != "fp16"`` and ``x == "bf16"`` may. ``dtype = torch.float16 if args.fp16 else
torch.bfloat16`` is float16 under ``{("args.fp16", True)}`` and bfloat16 under
``{("args.fp16", False)}``; the empty guard holds on every path. What cannot be known is an
``Atom`` (named by its text) and never guessed: a rule fires only on known values.

Pure data and small functions, no syntax: both strategies (the forward walk of the training
step and the backward lookup of a name's bindings) and every rule speak it.
"""
from __future__ import annotations

import re
from typing import NamedTuple, TypeAlias

#: a conjunction of literals (atom, value); the empty guard always holds
Guard: TypeAlias = frozenset
TRUE: Guard = frozenset()


class Atom:
    """A value the analysis cannot know, named by its source text: given, or read from
    ``script`` when first asked (most unknowns are never tested, and reading a long call's
    text is the cost). Two atoms of the same text are the same unknown."""

    __slots__ = ("_text", "_where")

    def __init__(self, text: str | None = None, script=None, node=None):
        self._text, self._where = text, (script, node)

    @property
    def text(self) -> str:
        if self._text is None:
            script, node = self._where
            self._text, self._where = script.text_of(node), None
        return self._text

    def __eq__(self, other):
        return isinstance(other, Atom) and self.text == other.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return f"Atom({self.text!r})"


#: an unknown that has no text worth naming (too deep, hidden in ``**kwargs``)
UNKNOWN = Atom("?")


class Possible(NamedTuple):
    """One value an expression may have, on the paths where ``guard`` holds; ``origin`` is
    the node that gave it (the conversion that made a module fp16)."""

    value: object
    guard: Guard = TRUE
    origin: object = None

    @property
    def known(self) -> bool:
        return not isinstance(self.value, Atom)

    def given(self, guard: Guard) -> "Possible | None":
        """This possibility on the paths where ``guard`` also holds; None when they
        contradict each other."""
        merged = join(self.guard, guard)
        return None if merged is None else Possible(self.value, merged, self.origin)


def known(value) -> tuple:
    """``value`` on every path."""
    return (Possible(value),)


def join(a: Guard, b: Guard) -> Guard | None:
    """Both guards at once; None when they contradict (an atom with two values)."""
    if not b:
        return a
    if not a:
        return b
    merged = a | b
    return merged if len({atom for atom, _ in merged}) == len(merged) else None


def equals(subject: str, value, truth: bool = True) -> Guard:
    """The guard under which the unknown ``subject`` equals the constant ``value``
    (``truth``) or differs from it: a keyed literal (one value per subject, so two values
    contradict) and the truth of the comparison (so equal and different contradict)."""
    compared = (f"{subject} == {value!r}", truth)
    return frozenset({(f"{subject} ==", value), compared}) if truth else frozenset({compared})


_COMPARED = re.compile(r"^(.*) == ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?[0-9][0-9.e+-]*|True|False|None)$", re.S)


def subject_of(atom: str) -> str:
    """What an equality literal is about (``x`` for ``x ==`` and ``x == 'fp16'``); the atom
    itself for any other literal."""
    if atom.endswith(" =="):
        return atom[:-3]
    found = _COMPARED.match(atom)
    return found.group(1) if found else atom


def complementary(a: Guard, b: Guard) -> Guard | None:
    """What ``a`` and ``b`` share when together they cover it (they differ only in one
    literal's truth, or in ``x == v`` against ``x != v``); None otherwise."""
    diff = a ^ b
    if len(diff) == 2:
        atoms = {atom for atom, _ in diff}
        if len(atoms) == 1 and {v for _, v in diff} == {True, False}:
            return a & b
        return None
    if len(diff) == 3:  # equals(x, v) against equals(x, v, False)
        keyed = [lit for lit in diff if lit[0].endswith(" ==")]
        if len(keyed) == 1:
            subject, value = keyed[0][0][:-3], keyed[0][1]
            if diff - set(keyed) == {(f"{subject} == {value!r}", True), (f"{subject} == {value!r}", False)}:
                return a & b
    return None


def negated(literal: tuple) -> tuple:
    atom, value = literal
    return atom, not value


def conjoin(possibles, guard: Guard) -> list:
    """Each possibility on the paths where ``guard`` also holds (contradictions dropped)."""
    return [q for q in (p.given(guard) for p in possibles) if q is not None]


def combine(*choices) -> list:
    """The consistent combinations of several expressions' possibilities (a branch taken
    for one is taken for all): ``(tuple of Possible, joint guard)`` each."""
    combos = [((), TRUE)]
    for choice in choices:
        combos = [(picked + (p,), g) for picked, guard in combos for p in choice
                  for g in [join(guard, p.guard)] if g is not None]
    return combos


def simplify(guards) -> Guard | None:
    """The simplest guard under which one of ``guards`` holds (None: always).

    Two guards that differ only in one literal's truth (or in ``x == v`` against ``x != v``)
    merge into their common part, until nothing merges; the shortest guard left is the condition worth saying."""
    current = set(guards)
    if TRUE in current:
        return None
    changed = True
    while changed:
        changed = False
        for a in list(current):
            for b in list(current):
                if a is b or abs(len(a) - len(b)) > 1:
                    continue
                common = complementary(a, b)
                if common is not None:
                    current -= {a, b}
                    current.add(common)
                    changed = True
                    break
            if changed:
                break
        if TRUE in current:
            return None
    return min(current, key=lambda g: (len(g), sorted(map(repr, g)))) if current else None


def words(guard: Guard | None, flags) -> str | None:
    """The guard in words, "when --fp16 is set and i % log_every == 0"; None for the guard
    that always holds. ``flags`` maps an atom to the argparse flag the script declares for
    it (``{"args.fp16": "--fp16"}``): a flag is named as the user types it, and nowhere
    else is one made up."""
    if not guard:
        return None
    keyed = {atom[:-3] for atom, value in guard if atom.endswith(" ==") and not isinstance(value, bool)}
    # ``x == 'bf16'`` says what ``x == 'bf16'`` is true and ``x == 'fp16'`` false say
    said = [(atom, value) for atom, value in guard if atom.endswith(" ==") or subject_of(atom) not in keyed]
    return "when " + " and ".join(_literal(atom, value, flags) for atom, value in sorted(said, key=repr))


def _literal(atom: str, value, flags) -> str:
    if not isinstance(value, bool):  # a table key: ``cf.attention_dtype == 'bf16'``
        subject = atom[:-3] if atom.endswith(" ==") else None
        if subject in flags:
            return f"{flags[subject]} is {value!r}"
        return f"{atom} {value!r}"
    compared = _COMPARED.match(atom)
    if compared and not compared.group(2).startswith(("'", '"')):
        compared = None  # ``i % n == 0`` keeps its own words
    if compared and not value:
        subject, constant = compared.groups()
        return f"{flags[subject]} is not {constant}" if subject in flags else f"{subject} != {constant}"
    if compared and compared.group(1) in flags:
        return f"{flags[compared.group(1)]} is {compared.group(2)}"
    if atom in flags:
        return f"{flags[atom]} is {'set' if value else 'not set'}"
    if all(part.isidentifier() for part in atom.split(".")):
        return f"{atom} is {'true' if value else 'false'}"
    return atom if value else f"not ({atom})"


def either(guards, flags) -> str | None:
    """Several guards, any of which holds, in words ("when a is true or when b is true");
    None when one of them always holds."""
    if any(not g for g in guards):
        return None
    return " or ".join(words(g, flags) for g in guards)
