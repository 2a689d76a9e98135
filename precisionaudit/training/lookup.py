"""The backward lookup: what an expression of a training script holds where it is read,
statically: dtypes (``torch.float16``, ``"bf16"``), numbers (``eps=EPS``), truth values
(``enabled=use_amp``), strings. One strategy of the two (the forward walk of the training
step is the other): from a read of a name back to the bindings that reach it.

A value is a list of ``guards.Possible``, one per path the code allows, each under the
guard that leads to it. A name is followed to its plain assignments in the scope Python
reads it from (``index.Index.bindings_of``), in source order: a later binding overrides an
earlier one on the paths it is made on (``x = fp32`` then ``if args.bf16: x = bf16`` is
fp32 when args.bf16 is false), one made after the use in the same scope is not read by
it, and a module constant read in a function may be any of its bindings. A function's
parameter is followed to the arguments of the calls of that function in the same file (or
its default). What cannot be said simply is unknown (an ``Atom``), never a guess: a binding
inside a loop or ``try`` that does not also hold the use (it may run any number of times),
an override under two or more conditions at once, an import, a loop target.
"""
from __future__ import annotations

import ast

from .guards import TRUE, UNKNOWN, Atom, Possible, conjoin, equals, join
from .syntax import DTYPE_STRINGS, DTYPES, FUNCTIONS

#: how many names / calls deep a value is followed
MAX_DEPTH = 6
#: more bindings of one name than this: not followed
MAX_BINDINGS = 8
_OPAQUE = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.Match, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_STOPS = (*FUNCTIONS, ast.ClassDef, ast.Module)


# ----------------------------------------------------------------------------- conditions
def test_literal(script, test) -> tuple:
    """The literal an ``if`` test stands for when it is true: ``not x`` is (x, False)."""
    truth = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, truth = test.operand, not truth
    return script.text_of(test), truth


def path_condition(script, node) -> frozenset:
    """The ``if`` tests (and conditional expressions) on the way from ``node`` up to its
    function: a branch is its test true, an ``else``/``elif`` branch the test false."""
    literals = set()
    parents = script.index.parents
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, (*FUNCTIONS, ast.Module)):
        if isinstance(parent, ast.If):
            if any(s is child for s in parent.body):
                literals.add(test_literal(script, parent.test))
            elif any(s is child for s in parent.orelse):
                code, truth = test_literal(script, parent.test)
                literals.add((code, not truth))
        elif isinstance(parent, ast.IfExp) and child is not parent.test:
            code, truth = test_literal(script, parent.test)
            literals.add((code, truth if child is parent.body else not truth))
        child, parent = parent, parents.get(parent)
    return frozenset(literals)


def _opaque_around(script, node, use) -> bool:
    """Whether ``node`` sits in a loop, ``try`` or comprehension (below its function) that
    does not also hold ``use``: it may have run any number of times when ``use`` runs."""
    parents = script.index.parents
    around_use = set()
    parent = parents.get(use)
    while parent is not None and not isinstance(parent, _STOPS):
        around_use.add(id(parent))
        parent = parents.get(parent)
    parent = parents.get(node)
    while parent is not None and not isinstance(parent, _STOPS):
        if isinstance(parent, _OPAQUE) and id(parent) not in around_use:
            return True
        parent = parents.get(parent)
    return False


# ----------------------------------------------------------------------------- names
def bound_values(script, name: ast.Name, depth: int = 0) -> list:
    """(expression, guard) for each value ``name`` may hold where it is read; an
    expression of None is a value that cannot be said (under its guard). [] when unknown."""
    if depth > MAX_DEPTH:
        return []
    index = script.index
    bindings = index.bindings_of(name)
    if not bindings or len(bindings) > MAX_BINDINGS:
        return []
    same_scope = bindings[0].scope is index.scope_of(name)
    use_at = script.position(name)
    use_condition = path_condition(script, name) if same_scope else TRUE
    candidates = []  # (position, [(value, guard)], condition or None when opaque)
    for binding in bindings:
        if binding.kind == "param":
            values = _parameter_values(script, binding, depth) or [(None, TRUE)]
            fn = binding.fn
            candidates.append(((fn.lineno, fn.col_offset), values, TRUE))
            continue
        at = script.position(binding.node)
        if same_scope and (at >= use_at or _assigned_by_its_value(script, binding.node, name)):
            continue  # rebound after the use (``a, opt = prepare(model, opt)``): not what the use reads
        if binding.kind != "assign":
            return []  # an import, a loop target, a def, a tuple unpacked: not a value read here
        opaque = _opaque_around(script, binding.node, name)
        condition = None if opaque else path_condition(script, binding.node) - use_condition
        candidates.append((at, [(binding.value, TRUE)], condition))
    candidates.sort(key=lambda c: c[0])
    found = []
    for i, (_, values, condition) in enumerate(candidates):
        reached = _reached(condition, [c for _, _, c in candidates[i + 1:]])
        if reached is False:
            continue
        if reached is None:
            found.append((None, TRUE))
            continue
        for value, guard in values:
            joined = join(guard, reached)
            if joined is not None:
                found.append((value, joined))
    return found


def _assigned_by_its_value(script, target, use) -> bool:
    """Whether ``target`` is bound by the assignment whose value holds ``use``."""
    parents = script.index.parents
    statement = parents.get(target)
    while statement is not None and not isinstance(statement, ast.stmt):
        statement = parents.get(statement)
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
        return False
    value = statement.value
    return (value.lineno, value.col_offset) <= script.position(use) <= (value.end_lineno, value.end_col_offset)


def _reached(condition, later) -> frozenset | None | bool:
    """The guard under which a binding made under ``condition`` is still what is read,
    given the conditions of the bindings after it; False when they always override it,
    None when that cannot be said simply (an opaque binding, or an override under two or
    more literals at once that are not already assumed: an ``elif`` after its ``if``
    overrides under one new literal)."""
    if condition is None:
        return None
    reached = set(condition)
    for other in later:
        if other is None:
            return None
        if any((atom, not value) in other for atom, value in reached):
            continue  # the later binding is on another branch
        new = set(other) - reached
        if not new:
            return False
        if len(new) != 1:
            return None
        (literal,) = new
        reached.add((literal[0], not literal[1]))
    return frozenset(reached)


def _parameter_values(script, binding, depth: int) -> list | None:
    """A parameter's values: the arguments its calls in this file pass (each under the
    call's path condition), or its default where a call leaves it out; None when unknown."""
    fn, param = binding.fn, binding.node
    if not isinstance(fn, FUNCTIONS):
        return None
    found = []
    for call in calls_of(script, fn):
        argument = argument_for(fn, param, call)
        if argument is None:
            default = default_of(fn, param)
            if default is None or any(isinstance(a, ast.Starred) for a in call.args) \
                    or any(k.arg is None for k in call.keywords):
                return None  # no value, or one hidden in *args / **kwargs
            found.append((default, TRUE))
        else:
            found.append((argument, path_condition(script, call)))
    return found or None


def calls_of(script, function) -> list:
    """The calls of a module-level function by its name, of a method through ``self.`` in
    its own class, and of a module-level class's ``__init__`` by the class's name."""
    index = script.index
    calls = index.by_name.get(function.name, ())
    cls = index.class_of(function)
    if cls is not None and function.name == "__init__" and index.parents.get(cls) is script.tree:
        return [c for c in index.by_name.get(cls.name, ()) if isinstance(c.func, ast.Name)]
    if cls is None and index.parents.get(function) is script.tree:
        return [c for c in calls if isinstance(c.func, ast.Name)]
    if cls is not None:
        return [c for c in calls if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                and c.func.value.id == "self" and index.class_of(c) is cls]
    return []


def argument_for(function, param: ast.arg, call: ast.Call):
    """The expression ``call`` passes for ``param``; None when it passes none by name or
    position (a ``*args``/``**kwargs`` may then hold it: the caller checks)."""
    for kw in call.keywords:
        if kw.arg == param.arg:
            return kw.value
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    positional = [*function.args.posonlyargs, *function.args.args]
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    for i, p in enumerate(positional):
        if p is param:
            return call.args[i] if i < len(call.args) else None
    return None


def default_of(function, param: ast.arg):
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    for i, p in enumerate(positional):
        if p is param:
            offset = i - (len(positional) - len(a.defaults))
            return a.defaults[offset] if offset >= 0 else None
    for p, default in zip(a.kwonlyargs, a.kw_defaults):
        if p is param:
            return default
    return None


# ----------------------------------------------------------------------------- evaluation
def evaluate(script, expr, leaf, depth: int = 0) -> list:
    """Possible values of ``expr``: ``leaf(script, expr)`` reads a literal (a value, a list
    of ``Possible`` alternatives, or UNKNOWN); names, conditional expressions, lookups in a
    dict literal and the declared defaults of a config's attributes are followed here."""
    if depth > MAX_DEPTH or expr is None:
        return [Possible(UNKNOWN)]
    if isinstance(expr, ast.IfExp):
        literal = test_literal(script, expr.test)
        return (conjoin(evaluate(script, expr.body, leaf, depth + 1), frozenset({literal}))
                + conjoin(evaluate(script, expr.orelse, leaf, depth + 1), frozenset({(literal[0], not literal[1])})))
    value = leaf(script, expr)
    if isinstance(value, list):
        return value
    if value is not UNKNOWN:
        return [Possible(value, origin=expr)]
    if isinstance(expr, ast.Name):
        found = []
        for bound, guard in bound_values(script, expr, depth + 1):
            values = [Possible(UNKNOWN)] if bound is None else evaluate(script, bound, leaf, depth + 1)
            found += conjoin(values, guard)
        return found or [Possible(UNKNOWN)]
    if isinstance(expr, ast.Subscript) and not isinstance(expr.slice, (ast.Slice, ast.Tuple)):
        return _table_lookup(script, expr, leaf, depth)
    if isinstance(expr, ast.Attribute):
        return _declared_default(script, expr, leaf, depth)
    return [Possible(UNKNOWN)]


def dict_literal(script, expr, depth: int = 0):
    """The dict literal ``expr`` is, or that the one binding of the name ``expr`` holds."""
    if isinstance(expr, ast.Dict):
        return expr
    if isinstance(expr, ast.Name) and depth < MAX_DEPTH:
        bound = bound_values(script, expr, depth + 1)
        if len(bound) == 1 and bound[0][0] is not None and not bound[0][1]:
            return dict_literal(script, bound[0][0], depth + 1)
    return None


def _table_lookup(script, expr: ast.Subscript, leaf, depth) -> list:
    """``{"bf16": torch.bfloat16, ...}[args.precision]``: the entry of a known key; under an
    unknown key, every entry under the condition that the key names it."""
    table = dict_literal(script, expr.value, depth)
    if table is None or any(not (isinstance(k, ast.Constant) and isinstance(k.value, str)) for k in table.keys):
        return [Possible(UNKNOWN)]
    entries = dict(zip((k.value for k in table.keys), table.values))
    found = []
    for key in strings(script, expr.slice, depth + 1):
        if key.known:
            if key.value in entries:
                found += conjoin(evaluate(script, entries[key.value], leaf, depth + 1), key.guard)
            continue
        subject = script.text_of(expr.slice)
        for name, value in entries.items():
            found += conjoin(evaluate(script, value, leaf, depth + 1), key.guard | equals(subject, name))
    return found or [Possible(UNKNOWN)]


def _declared_default(script, expr: ast.Attribute, leaf, depth) -> list:
    """``args.dtype`` whose ``--dtype`` the script declares with ``default="bf16"``, or
    ``cfg.dtype`` where one class of the file declares ``dtype: str = "bf16"`` (and no call
    of it passes ``dtype``): the default when the value is left as declared, unknown
    otherwise. Either way the condition names the attribute."""
    default = declared_default(script, expr)
    if default is None:
        return [Possible(UNKNOWN)]
    subject = script.text_of(expr)
    found = conjoin(evaluate(script, default, leaf, depth + 1), equals(subject, default.value))
    return found + [Possible(UNKNOWN, equals(subject, default.value, False))]


def declared_default(script, expr):
    """The string literal an argparse flag or a config class declares as the default of
    ``expr`` (``args.dtype``, ``cfg.dtype``, ``self.config.dtype``); None when none is declared."""
    if not isinstance(expr, ast.Attribute) or isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return None  # self.dtype: the object's own state, not a config it was given
    index = script.index
    if isinstance(expr.value, ast.Name) and expr.value.id in index.args_names:
        return index.flag_defaults.get(expr.attr)
    declared = index.field_defaults.get(expr.attr, ())
    if len(declared) != 1:
        return None
    cls, default = declared[0]
    if any(argument_named(call, expr.attr) for call in index.by_name.get(cls.name, ())):
        return None  # the class is built with that field given: the default is not what runs
    return default


def argument_named(call: ast.Call, name: str) -> bool:
    return any(k.arg == name or k.arg is None for k in call.keywords) or bool(call.args)


def dtype_literal(script, expr):
    """'float16' for ``torch.float16`` / ``torch.half`` (however imported) or a dtype
    string, None for ``None`` (no dtype given), the alternatives of ``getattr(torch,
    name)`` for the strings ``name`` may hold; UNKNOWN otherwise."""
    if isinstance(expr, ast.Call) and len(expr.args) >= 2 and script.names_of(expr.func) == {"builtins.getattr"} \
            and script.names_of(expr.args[0]) == {"torch"}:
        return [Possible(DTYPES.get(f"torch.{p.value}", UNKNOWN) if p.known else UNKNOWN, p.guard, expr)
                for p in strings(script, expr.args[1])]
    if isinstance(expr, (ast.Attribute, ast.Name)):
        for name in sorted(script.names_of(expr)):
            if name in DTYPES:
                return DTYPES[name]
        return UNKNOWN
    if isinstance(expr, ast.Constant):
        if expr.value is None:
            return None
        if isinstance(expr.value, str):
            return DTYPE_STRINGS.get(expr.value, UNKNOWN)
    return UNKNOWN


def dtypes(script, expr, depth: int = 0) -> list:
    return evaluate(script, expr, dtype_literal, depth)


def known_dtypes(script, expr) -> list | None:
    """Every dtype ``expr`` may stand for; None when any path is unknown (a rule that must
    know every path stays silent)."""
    found = dtypes(script, expr)
    return None if any(not p.known for p in found) else found


def number_literal(script, expr):
    """A constant number: ``1e-8``, ``-1``, ``10 ** -8``, ``1 / 1e8``; UNKNOWN otherwise."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return float(expr.value)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        inner = number_literal(script, expr.operand)
        if inner is UNKNOWN:
            return UNKNOWN
        return -inner if isinstance(expr.op, ast.USub) else inner
    if isinstance(expr, ast.BinOp):
        return arithmetic(expr.op, number_literal(script, expr.left), number_literal(script, expr.right))
    return UNKNOWN


def arithmetic(operator, left, right):
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    try:
        if isinstance(operator, ast.Pow):
            return float(left ** right) if abs(right) <= 400 else UNKNOWN
        operation = {ast.Add: float.__add__, ast.Sub: float.__sub__,
                     ast.Mult: float.__mul__, ast.Div: float.__truediv__}.get(type(operator))
        return UNKNOWN if operation is None else operation(left, right)
    except (ArithmeticError, TypeError, ValueError):
        return UNKNOWN


def numbers(script, expr, depth: int = 0) -> list:
    return evaluate(script, expr, _number_or_names, depth)


def _number_or_names(script, expr):
    """A constant number, or arithmetic on names that each hold one known number
    (``EPS * 0.1``)."""
    value = number_literal(script, expr)
    if value is UNKNOWN and isinstance(expr, ast.BinOp):
        left, right = numbers(script, expr.left), numbers(script, expr.right)
        if len(left) == 1 == len(right):
            return arithmetic(expr.op, left[0].value, right[0].value)
    return value


def string_literal(script, expr):
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else UNKNOWN


def strings(script, expr, depth: int = 0) -> list:
    return evaluate(script, expr, string_literal, depth)


def truth_literal(script, expr):
    """True / False for the constants (UNKNOWN otherwise)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    return UNKNOWN


def truths(script, expr, depth: int = 0) -> list:
    """Possible truth values of ``expr``; an unknown test ``x`` becomes True where x is
    true and False where it is false, so that a rule can say under which condition.
    ``dtype == torch.float16`` is decided where ``dtype``'s value is known."""
    compared = _dtype_comparison(script, expr, depth)
    if compared:
        return compared
    found = evaluate(script, expr, truth_literal, depth)
    if all(not p.known for p in found) and isinstance(expr, ast.Name) and depth < MAX_DEPTH:
        bound = bound_values(script, expr, depth + 1)
        if len(bound) == 1 and not bound[0][1] and bound[0][0] is not None:  # use_amp = args.amp: say "--amp"
            return truths(script, bound[0][0], depth + 1)
    if all(not p.known for p in found):
        literal = test_literal(script, expr)
        return [Possible(True, frozenset({literal})), Possible(False, frozenset({(literal[0], not literal[1])}))]
    return found


def _dtype_comparison(script, expr, depth) -> list:
    """``a == b`` / ``a != b`` / ``a is b`` between dtypes whose values are all known."""
    if not isinstance(expr, ast.Compare) or len(expr.ops) != 1 \
            or not isinstance(expr.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        return []
    left, right = dtypes(script, expr.left, depth + 1), dtypes(script, expr.comparators[0], depth + 1)
    if any(not p.known or p.value is None for p in left + right):
        return []
    equal = isinstance(expr.ops[0], (ast.Eq, ast.Is))
    found = []
    for a in left:
        for b in right:
            both = join(a.guard, b.guard)
            if both is not None:
                found.append(Possible((a.value == b.value) == equal, both))
    return found


__all__ = ["Atom", "MAX_DEPTH", "UNKNOWN", "bound_values", "calls_of", "dtypes", "evaluate", "known_dtypes",
           "numbers", "path_condition", "strings", "test_literal", "truths"]
