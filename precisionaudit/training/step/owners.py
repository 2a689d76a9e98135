"""Which framework owns the step where a call is made: the owner objects (``values.Owner``)
the walk meets, made where a framework's maker is called (``owner_values``, from
``forward.evaluate``), named as the framework's examples name them when made elsewhere, or
a LightningModule's ``self`` under the precision of the file's ``Trainer(...)``
(``owners``). What their calls do is ``owned.py``'s.

A precision the code does not say splits the owner on whether it scales the loss, in the
words of the table (``accelerate's mixed_precision is 'fp16'``); a named one
(``Accelerator(mixed_precision=args.mp)``) on whether that name equals the scaling value.
"""
from __future__ import annotations

import ast

from ..frameworks import framework_of, step_frameworks
from ..frameworks.deepspeed import DEEPSPEED, config_precision
from ..frameworks.lightning import LIGHTNING, TRAINERS, is_module_class
from ..guards import Atom, Possible, equals, join, known
from ..syntax import argument, key_of, own_returns
from .values import Owner

#: keyword arguments of a maker that turn on gradient accumulation (accelerate)
ACCUMULATION = ("gradient_accumulation_steps", "gradient_accumulation_plugin")


def owner_values(script, call: ast.Call, names, evaluate, p) -> tuple | None:
    """The owner ``call`` makes, as alternatives (None: not a framework's maker)."""
    framework = framework_of(names)
    if framework is None:
        return None
    accumulates = _accumulates(call)
    if framework is DEEPSPEED:
        spelled = config_precision(script, call)
        given = known(spelled) if spelled is not None else None
    else:
        argument_node = argument(call, framework.precision_keyword) if framework.precision_keyword else None
        given = evaluate(script, argument_node, p) if argument_node is not None else (
            known(framework.default) if framework.default is not None else None)
    return tuple(_alternatives(framework, call, given, accumulates))


def returned_maker(script, call: ast.Call):
    """The framework maker call a helper of this file returns, where ``call`` calls that
    helper (``def maybe_distribute(args, model, ...): ... return deepspeed.initialize(...)``,
    DALLE-pytorch's; ``def get_accelerator(args): return Accelerator(...)``): the helper's
    result is what that call makes, its other returns handing back what it was given.
    None when ``call`` is no such call or the helper returns more than one maker call."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    return script.once(_helper_makers).get(call.func.id)


def _helper_makers(script) -> dict:
    """function name -> the one framework maker call it returns, for the module-level
    functions of this file that return one."""
    found = {}
    for name, fn in script.index.functions.items():
        made = [r.value for r in own_returns(fn)
                if isinstance(r.value, ast.Call) and framework_of(script.names_of(r.value.func)) is not None]
        if len(made) == 1:
            found[name] = made[0]
    return found


def _accumulates(call) -> bool:
    for keyword in ACCUMULATION:
        given = argument(call, keyword)
        if given is not None and not (isinstance(given, ast.Constant) and given.value == 1):
            return True
    return False


def _alternatives(framework, node, given, accumulates=False) -> list:
    """Owner alternatives for the precision ``given`` (alternatives, or None: unknown)."""
    if given is None:
        return [Possible(Owner(framework, node, truth, framework.scaling if truth else None, accumulates),
                         frozenset({(framework.unknown, truth)})) for truth in (True, False)]
    out = []
    for a in given:
        if isinstance(a.value, Atom):
            for truth in (True, False):
                g = join(a.guard, equals(a.value.text, framework.scaling, truth))
                if g is not None:
                    out.append(Possible(Owner(framework, node, truth, framework.scaling if truth else None,
                                              accumulates), g))
            continue
        precision = framework.precisions.get(a.value)
        if precision is not None:
            out.append(Possible(Owner(framework, node, precision.scales, a.value, accumulates), a.guard))
    return out


def owners(walker, receiver, p) -> list:
    """The owner ``receiver`` is on path ``p``, as alternatives ([]: not one)."""
    key = key_of(receiver)
    bound = p.env.get(key) if key else None
    if bound and any(isinstance(a.value, Owner) for a in bound):
        return [a for a in bound if isinstance(a.value, Owner)]
    if bound:
        return []
    frame = walker.frames[-1]
    if key == "self" and frame.cls is not None:
        return walker.script.once(_lightning_owners).get(frame.cls, [])
    if key is None:
        return []
    script, last = walker.script, key.rsplit(".", 1)[-1]
    for framework in step_frameworks():
        if last in framework.names and framework.packages & script.index.imported:
            if framework is not DEEPSPEED or key in script.index.step.engine_keys:
                return _alternatives(framework, None, None)
    return []


def _lightning_owners(script) -> dict:
    """class name -> the owner alternatives of ``self`` in a LightningModule of this file:
    the precision of the file's ``Trainer(...)`` calls (unknown when there is none, or they
    disagree)."""
    classes = {name: cls for name, cls in script.index.classes.items() if is_module_class(script, cls)}
    if not classes:
        return {}
    from ..params import lightning_trainers

    given = lightning_trainers(script)
    spellings = [v.value if v.known and not v.guard else None for _, values in given for v in values]
    spellings += [LIGHTNING.default for call in script.index.by_name.get("Trainer", ())
                  if script.names_of(call.func) & TRAINERS and argument(call, "precision") is None]
    precisions = {LIGHTNING.precisions.get(s) for s in spellings}
    if spellings and None not in precisions and len({p.scales for p in precisions}) == 1:
        spelled = next(s for s in spellings)
        alternatives = [Possible(Owner(LIGHTNING, None, precisions.pop().scales, spelled))]
    else:
        alternatives = _alternatives(LIGHTNING, None, None)
    return {name: [Possible(a.value, a.guard) for a in alternatives] for name in classes}


def in_play(script) -> bool:
    """Whether a framework's step may be in this file (the file imports one)."""
    return script.once(_in_play)


def _in_play(script) -> bool:
    imported = script.index.imported
    return any(framework.packages & imported for framework in step_frameworks())
