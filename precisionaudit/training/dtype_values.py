"""What dtype an expression of a training script stands for, statically, on each path the
code allows: ``torch.bfloat16``; ``torch.half`` through an alias; a name bound to one
(``DTYPE = torch.bfloat16``, or in ``if``/``else`` branches);
``torch.float16 if args.fp16 else torch.bfloat16``, which is float16 "when --fp16 is set"
and bfloat16 otherwise. Anything else is unknown (None), and a rule stays silent on an
unknown.
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
            return _possible_bound(script, node, hops)
        return None
    if isinstance(node, cst.IfExp):
        test = script.module.code_for_node(node.test).strip()
        body = possible_dtypes(script, node.body, hops + 1)
        orelse = possible_dtypes(script, node.orelse, hops + 1)
        if body is None or orelse is None:
            return None
        return _with(body, (test, True)) + _with(orelse, (test, False))
    return None


def _possible_bound(script, name, hops):
    bound = _bound_values(script, name)
    if bound is None:
        return None
    possibles = []
    for value, conditions in bound:
        choice = possible_dtypes(script, value, hops + 1)
        if choice is None:
            return None
        for condition in conditions:
            choice = _with(choice, condition)
        possibles += choice
    return possibles


def _with(possibles, condition):
    return [Possible(p.dtype, p.conditions | {condition}) for p in possibles
            if (condition[0], not condition[1]) not in p.conditions]


def _bound_values(script, name: cst.Name) -> list | None:
    """[(value, conditions)] for the plain ``NAME = value`` bindings of ``name`` and the
    ``if`` branches each sits in; None when any binding is something else (a parameter, an
    import, a loop target, a binding inside a loop or ``try``) or the branches leave the
    outcome unclear.

    Bindings are taken in source order (LibCST scopes are not flow-sensitive): a later
    binding overrides an earlier one on the paths it is made on; one made after the use in
    the same scope is not read by it (a global read in a function may be rebound later:
    every binding counts there).
    ``x = fp32`` then ``if args.bf16: x = bf16`` is fp32 "when --bf16 is not set"."""
    scope = script.scopes.get(name)
    if scope is None:
        return None
    try:
        assignments = list(scope[name.value])
    except Exception:  # noqa: BLE001 - LibCST raises on names it cannot place
        return None
    if not assignments or len(assignments) > _MAX_HOPS:
        return None
    used_at = script.positions[name].start
    bound = []
    for assignment in assignments:
        target = getattr(assignment, "node", None)
        value = _assigned_value(script, target) if isinstance(target, cst.Name) else None
        conditions = _branch_conditions(script, target) if value is not None else None
        if conditions is None:
            return None
        at = script.positions[target].start
        if getattr(assignment, "scope", None) is scope and (at.line, at.column) > (used_at.line, used_at.column):
            continue  # rebound after the use, in the same function: not what the use reads
        bound.append((at, value, conditions))
    bound.sort(key=lambda b: (b[0].line, b[0].column))
    values = []
    for i, (_, value, conditions) in enumerate(bound):
        reached = set(conditions)
        for _, _, later in bound[i + 1:]:
            if any((c, not t) in later for c, t in reached):
                continue  # the later binding is on another branch
            if not later:
                reached = None  # overridden on every path
                break
            if len(later) != 1:
                return None  # overridden when two or more conditions hold: not said simply
            (code, truth), = later
            if (code, truth) in reached:
                reached = None  # overridden on every path this binding is on
                break
            reached.add((code, not truth))
        if reached is not None:
            values.append((value, frozenset(reached)))
    return values or None


def _assigned_value(script, target: cst.Name):
    parent = script.parents.get(target)
    assign = script.parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        return assign.value
    if isinstance(parent, cst.AnnAssign) and parent.value is not None:
        return parent.value
    return None


_OPAQUE = (cst.For, cst.While, cst.Try, cst.TryStar, cst.Match, cst.Lambda, cst.ListComp, cst.SetComp,
           cst.DictComp, cst.GeneratorExp)


def _branch_conditions(script, node) -> frozenset | None:
    """The (test, truth) of every ``if``/``elif``/``else`` branch around ``node`` up to its
    function, class or module; None inside a loop or ``try`` (the binding may run any
    number of times)."""
    conditions, child = set(), node
    parent = script.parents.get(child)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(parent, _OPAQUE):
            return None
        if isinstance(parent, cst.If):
            test = script.module.code_for_node(parent.test).strip()
            if child is parent.body:
                conditions.add((test, True))
            elif child is parent.orelse:
                conditions.add((test, False))
        child, parent = parent, script.parents.get(parent)
    return frozenset(conditions)


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
