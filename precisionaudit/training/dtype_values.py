"""What dtype an expression of a training script stands for, statically, on each path the
code allows: ``torch.bfloat16``; ``torch.half`` through an alias; a name bound once to one
(``DTYPE = torch.bfloat16``); ``torch.float16 if args.fp16 else torch.bfloat16``, which is
float16 "when --fp16 is set" and bfloat16 otherwise. Anything else is unknown (None), and a
rule stays silent on an unknown.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

#: qualified torch names of the floating dtypes -> the dtype's name
TORCH_DTYPES = {
    "torch.float16": "float16", "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float32": "float32", "torch.float": "float32",
    "torch.float64": "float64", "torch.double": "float64",
}
LOW_DTYPES = ("float16", "bfloat16")
_MAX_HOPS = 8  # name -> assignment -> name ...: a chain longer than this is unknown


@dataclass(frozen=True)
class Possible:
    """One value an expression may have and the branch conditions that lead to it."""

    #: a ``TORCH_DTYPES`` value, or None for a literal ``None``
    dtype: str | None
    #: frozenset of (condition source, truth); empty on every path
    conditions: frozenset = frozenset()


def possible_dtypes(script, node, hops: int = 0) -> list[Possible] | None:
    """Every dtype ``node`` may stand for, with its conditions; None when any path is
    unknown (a rule then stays silent)."""
    if hops > _MAX_HOPS:
        return None
    if isinstance(node, cst.Name) and node.value == "None":
        return [Possible(None)]
    if isinstance(node, (cst.Name, cst.Attribute)):
        names = script.names_of(node)
        dtypes = {TORCH_DTYPES[n] for n in names if n in TORCH_DTYPES}
        if len(dtypes) == 1 and len(names) == 1:
            return [Possible(dtypes.pop())]
        if isinstance(node, cst.Name):
            bound = _single_binding(script, node)
            return None if bound is None else possible_dtypes(script, bound, hops + 1)
        return None
    if isinstance(node, cst.IfExp):
        test = script.module.code_for_node(node.test).strip()
        body = possible_dtypes(script, node.body, hops + 1)
        orelse = possible_dtypes(script, node.orelse, hops + 1)
        if body is None or orelse is None:
            return None
        return _with(body, (test, True)) + _with(orelse, (test, False))
    return None


def _with(possibles, condition):
    return [Possible(p.dtype, p.conditions | {condition}) for p in possibles
            if (condition[0], not condition[1]) not in p.conditions]


def _single_binding(script, name: cst.Name):
    """The value ``name`` is bound to where it is bound exactly once, by a plain
    ``NAME = value``; None otherwise (reassigned, a parameter, an import, a loop target)."""
    scope = script.scopes.get(name)
    if scope is None:
        return None
    try:
        assignments = list(scope[name.value])
    except Exception:  # noqa: BLE001 - LibCST raises on names it cannot place
        return None
    if len(assignments) != 1:
        return None
    target = getattr(assignments[0], "node", None)
    if not isinstance(target, cst.Name):
        return None
    parent = script.parents.get(target)
    assign = script.parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        return assign.value
    if isinstance(parent, cst.AnnAssign) and parent.value is not None:
        return parent.value
    return None


def combine(*choices):
    """The consistent combinations of several expressions' possibilities (a branch taken
    for one is taken for all): a list of (tuple of Possible, conditions)."""
    combos = [((), frozenset())]
    for choice in choices:
        combos = [(picked + (p,), conds | p.conditions) for picked, conds in combos for p in choice
                  if not any((c, not t) in conds for c, t in p.conditions)]
    return combos


_FLAG = re.compile(r"^(?:args|opt|opts|cli_args|flags|hparams|config|cfg)\.(\w+)$")


def condition_text(conditions) -> str | None:
    """The conditions in words: "when --fp16 is set", "when not (x == 1)"; None for none."""
    if not conditions:
        return None
    words = []
    for code, truth in sorted(conditions):
        flag = _FLAG.match(code)
        if flag:
            words.append(f"--{flag.group(1)} is {'set' if truth else 'not set'}")
        else:
            words.append(code if truth else f"not ({code})")
    return "when " + " and ".join(words)
