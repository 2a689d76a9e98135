"""The forward walk's evaluation of an expression on one path (``paths.Path``): what it
may be worth there, as alternatives under guards (``values.py``), from the names the path
has bound so far. What cannot be known is an ``Atom`` named by its source text, so that a
test on it splits the path into one where it is true and one where it is false.
"""
from __future__ import annotations

import ast

from ..guards import TRUE, Atom, Possible, equals, join, known
from ..syntax import AUTOCASTS, DEFAULT_AUTOCAST_DTYPE, DTYPES, SCALERS, argument, key_of, method_of
from .owners import owner_values, returned_maker
from .values import Autocast, Dtype, Scaler, Table, combine, negate, truth

_CONSTANTS = (True, False, None)


def evaluate(script, expr, p) -> tuple:
    """``expr``'s value alternatives on path ``p``."""
    if isinstance(expr, ast.Constant):
        value = expr.value
        if isinstance(value, str) or any(value is c for c in _CONSTANTS):
            return known(value)
        return known(Atom(script=script, node=expr))
    if isinstance(expr, ast.Name) and expr.id == "__name__":
        return known("__main__")
    if isinstance(expr, (ast.Name, ast.Attribute)):
        for name in sorted(script.names_of(expr)):
            if name in DTYPES:
                return known(Dtype(DTYPES[name]))
        key = key_of(expr)
        if key and key in p.env:
            return p.env[key]
        return known(Atom(script=script, node=expr))
    if isinstance(expr, ast.IfExp):
        out = []
        for test in truth(evaluate(script, expr.test, p)):
            for branch in evaluate(script, expr.body if test.value else expr.orelse, p):
                g = join(test.guard, branch.guard)
                if g is not None:
                    out.append(Possible(branch.value, g))
        return tuple(out)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return tuple(negate(truth(evaluate(script, expr.operand, p))))
    if isinstance(expr, ast.BoolOp):
        op = (lambda a, b: a and b) if isinstance(expr.op, ast.And) else (lambda a, b: a or b)
        result = truth(evaluate(script, expr.values[0], p))
        for value in expr.values[1:]:
            result = combine(result, truth(evaluate(script, value, p)), op)
        return tuple(result)
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        return _compare(script, expr, p)
    if isinstance(expr, ast.Dict):
        return _table(script, expr, p)
    if isinstance(expr, ast.Subscript) and not isinstance(expr.slice, (ast.Slice, ast.Tuple)):
        return _lookup(script, expr, p)
    if isinstance(expr, ast.Call):
        return _call(script, expr, p)
    return known(Atom(script=script, node=expr))


def _call(script, expr: ast.Call, p) -> tuple:
    if method_of(expr) == "is_enabled" and not expr.args and not expr.keywords:
        found = scalers(script, expr.func.value, p)
        if found:
            return tuple(Possible(s.value.enabled, s.guard) for s in found)
    names = script.names_of(expr.func)
    if len(expr.args) == 1 and not expr.keywords and not isinstance(expr.args[0], ast.Starred) and (
            names & {"torch.device", "builtins.str"} or isinstance(expr.func, ast.Name) and expr.func.id == "str"):
        return _device(script, expr.args[0], expr, p)  # torch.device("cuda" if ... else "cpu")
    made = owner_values(script, expr, names, evaluate, p) if names else None
    if made is not None:
        return made
    returned = returned_maker(script, expr)
    if returned is not None:  # a helper of this file that returns a framework's maker call
        return owner_values(script, returned, script.names_of(returned.func), evaluate, p)
    for name in sorted(names):
        if name in SCALERS:
            return scaler_value(script, expr, SCALERS[name], p)
        if name in AUTOCASTS:
            return _autocast_value(script, expr, AUTOCASTS[name], p)
    return known(Atom(script=script, node=expr))


def scalers(script, receiver, p) -> list:
    """The scaler ``receiver`` is on this path, as alternatives (empty: not a scaler). A
    name used as a scaler that this walk did not see made is taken as enabled."""
    key = key_of(receiver)
    alternatives = p.env.get(key) if key else None
    if alternatives and any(isinstance(a.value, Scaler) for a in alternatives):
        return [a for a in alternatives if isinstance(a.value, Scaler)]
    if key in script.index.step.scaler_keys and not alternatives:
        return [Possible(Scaler(None, True, key))]
    return []


def _device(script, inner, expr, p) -> tuple:
    """A device named by strings on every path (``"cuda"``, ``"cuda:0"`` -> ``"cuda"``);
    anything else is unknown."""
    alternatives = evaluate(script, inner, p)
    if all(isinstance(a.value, str) for a in alternatives):
        return tuple(Possible(a.value.split(":")[0], a.guard) for a in alternatives)
    return known(Atom(script=script, node=expr))


def _table(script, expr: ast.Dict, p) -> tuple:
    entries = []
    for key, value in zip(expr.keys, expr.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return known(Atom(script=script, node=expr))
        entries.append((key.value, evaluate(script, value, p)))
    return known(Table(tuple(entries)))


def _lookup(script, expr: ast.Subscript, p) -> tuple:
    """``table[key]``: the entry of a known key; under an unknown key, every entry,
    each under the condition that the key names it."""
    whole = known(Atom(script=script, node=expr))
    tables = evaluate(script, expr.value, p)
    if not all(isinstance(t.value, Table) for t in tables):
        return whole
    out = []
    for table in tables:
        for key in evaluate(script, expr.slice, p):
            g = join(table.guard, key.guard)
            if g is None:
                continue
            for name, alternatives in table.value.entries:
                if isinstance(key.value, Atom):
                    # the key equals the entry's name: two entries never hold at once
                    cond = join(g, equals(key.value.text, name))
                else:
                    cond = g if key.value == name else None
                if cond is None:
                    continue
                out += [Possible(a.value, c) for a in alternatives for c in [join(cond, a.guard)] if c is not None]
    return tuple(out) or whole


_COMPARISONS = {ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not"}


def _compare(script, expr: ast.Compare, p) -> tuple:
    kind = _COMPARISONS.get(type(expr.ops[0]))
    whole = known(Atom(script=script, node=expr))
    if kind is None:
        return whole
    out = []
    for left in evaluate(script, expr.left, p):
        for right in evaluate(script, expr.comparators[0], p):
            g = join(left.guard, right.guard)
            if g is None:
                continue
            vl, vr = left.value, right.value
            unknown, constant = (vl, vr) if isinstance(vl, Atom) else (vr, vl)
            if kind in ("==", "!=") and isinstance(unknown, Atom) and isinstance(constant, str):
                for truth_value in (True, False):  # x == "fp16" and x == "bf16" never both hold
                    h = join(g, equals(unknown.text, constant, truth_value))
                    if h is not None:
                        out.append(Possible(truth_value == (kind == "=="), h))
                continue
            if isinstance(vl, Atom) or isinstance(vr, Atom):
                out.append(Possible(Atom(script=script, node=expr), g))
                continue
            if kind in ("is", "is not") and (vl is None or vr is None):
                same = vl is None and vr is None  # ``scaler is not None`` on a made scaler
            else:
                same = vl == vr
            out.append(Possible(same if kind in ("==", "is") else not same, g))
    return tuple(out) or whole


def scaler_value(script, call, position, p) -> tuple:
    enabled = argument(call, "enabled", position)
    alternatives = truth(evaluate(script, enabled, p)) if enabled is not None else [Possible(True)]
    return tuple(Possible(Scaler(call, a.value), a.guard) for a in alternatives)


def _autocast_value(script, call, spec, p) -> tuple:
    device, dtype_at, enabled_at = spec
    if device:
        devices = known(device)
    else:
        given = argument(call, "device_type", 0)
        devices = evaluate(script, given, p) if given is not None else known(Atom("?"))
    dtype = argument(call, "dtype", dtype_at)
    dtypes = evaluate(script, dtype, p) if dtype is not None else known(None)
    enabled = argument(call, "enabled", enabled_at)
    enableds = truth(evaluate(script, enabled, p)) if enabled is not None else [Possible(True)]
    every_device_known = all(isinstance(d.value, str) for d in devices)
    out = []
    for d in devices:
        for t in dtypes:
            for e in enableds:
                g = join(d.guard, t.guard)
                g = join(g, e.guard) if g is not None else None
                if g is None:
                    continue
                if isinstance(t.value, Dtype):
                    name = t.value.name
                elif t.value is None and isinstance(d.value, str) and every_device_known:
                    # the device's default dtype, only where the device is known on every
                    # path: ``autocast(d if d != "mps" else "cpu")`` may not cover the
                    # tensors' device at all
                    name = DEFAULT_AUTOCAST_DTYPE.get(d.value)
                else:
                    name = None
                out.append(Possible(Autocast(call, name, e.value), g))
    return tuple(out)


__all__ = ["TRUE", "evaluate", "scaler_value", "scalers"]
