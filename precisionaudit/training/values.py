"""What an expression of a training script may evaluate to, read statically: dtypes
(``torch.float16``), numbers (``eps=EPS``) and truth values (``enabled=use_amp``).

A value is a list of ``Possible``s, one per path the code allows, each with the path
condition under which it holds (``args.fp16`` true). A value the analysis cannot know (a
command-line flag, a function's result) is not guessed: it is absent (``[]``) or, inside
a list, a ``Possible`` whose value is ``UNKNOWN``. Rules fire only on known values.

Names are resolved through LibCST's ScopeProvider: the assignments of a name in its scope
that come before the use (the last one, and the conditional ones before it, each with the
``if`` tests that lead to it), module constants, and a function's parameters through the
calls of that function in the same file (or the parameter's default).
"""
from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import libcst as cst
from libcst import metadata

from ..core.errors import UsageError

#: a value the analysis cannot know
UNKNOWN = None
#: how many names / calls deep a value is followed
MAX_DEPTH = 6

DTYPE_NAMES = {
    "torch.float16": "float16", "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float32": "float32", "torch.float": "float32",
    "torch.float64": "float64", "torch.double": "float64",
    # tensor types, as Module.type() takes them
    "torch.HalfTensor": "float16", "torch.cuda.HalfTensor": "float16",
    "torch.BFloat16Tensor": "bfloat16", "torch.cuda.BFloat16Tensor": "bfloat16",
    "torch.FloatTensor": "float32", "torch.cuda.FloatTensor": "float32",
}
#: how from_pretrained(torch_dtype="...") strings name dtypes
DTYPE_STRINGS = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16",
                 "bf16": "bfloat16", "float32": "float32", "fp32": "float32", "float": "float32"}


@dataclass(frozen=True)
class Possible:
    """One value an expression may have, on the paths where every literal of ``condition``
    holds. A literal is (the test's source code, whether it is true)."""

    value: object
    condition: frozenset = frozenset()
    #: the node that gave the value (a conversion call, for parameter dtypes)
    origin: object = None

    def given(self, condition) -> Possible | None:
        """This possibility on the paths where ``condition`` also holds; None when the two
        contradict each other (``args.fp16`` both true and false)."""
        merged = self.condition | frozenset(condition)
        if any((code, not truth) in merged for code, truth in merged):
            return None
        return Possible(self.value, merged, self.origin)


def conjoin(possibles, condition) -> list:
    return [q for q in (p.given(condition) for p in possibles) if q is not None]


# ----------------------------------------------------------------------------- conditions
def condition_words(condition) -> str | None:
    """``{("args.fp16", True)}`` -> "when --fp16 is set"; None for the empty condition."""
    if not condition:
        return None
    return "when " + " and ".join(_literal_words(code, truth) for code, truth in sorted(condition))


def _literal_words(code: str, truth: bool) -> str:
    if code.startswith("args.") and code[5:].isidentifier():
        return f"--{code[5:]} is {'set' if truth else 'not set'}"
    return f"{code} is {'true' if truth else 'false'}"


def test_literals(script, test) -> frozenset:
    """The literal(s) an ``if`` test stands for when it is true: ``not x`` is (x, False)."""
    truth = True
    test = _unparenthesized(test)
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, truth = _unparenthesized(test.expression), not truth
    return frozenset({(script.module.code_for_node(test).strip(), truth)})


def path_condition(script, node) -> frozenset:
    """The ``if`` tests on the way from ``node`` up to its function: an
    ``elif`` branch is its own test true and the tests before it false."""
    literals = set()
    child, parent = node, script.parents.get(node)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Module)):
        if isinstance(parent, cst.If):
            (code, truth), = test_literals(script, parent.test)
            if child is parent.body:
                literals.add((code, truth))
            elif child is parent.orelse:
                literals.add((code, not truth))
        elif isinstance(parent, cst.IfExp):
            (code, truth), = test_literals(script, parent.test)
            if child is parent.body:
                literals.add((code, truth))
            elif child is parent.orelse:
                literals.add((code, not truth))
        child, parent = parent, script.parents.get(parent)
    return frozenset(literals)


# ----------------------------------------------------------------------------- positions
def position(script, node) -> tuple[int, int]:
    start = script.positions[node].start
    return start.line, start.column


def enclosing_function(script, node):
    """The FunctionDef ``node`` is in (None at module level)."""
    parent = script.parents.get(node)
    while parent is not None and not isinstance(parent, cst.FunctionDef):
        parent = script.parents.get(parent)
    return parent


def enclosing_class(script, node):
    parent = script.parents.get(node)
    while parent is not None and not isinstance(parent, cst.ClassDef):
        parent = script.parents.get(parent)
    return parent


# ----------------------------------------------------------------------------- names
def bound_values(script, name: cst.Name, depth: int = 0) -> list:
    """The expressions ``name`` may hold where it is read: (value expression, condition).
    A parameter is followed to the arguments of the calls in this file. [] when unknown."""
    if depth > MAX_DEPTH:
        return []
    scope = script.scopes.get(name)
    if scope is None:
        return []
    accesses = [a for a in scope.accesses[name.value] if a.node is name]
    if not accesses:
        return []
    use_at = position(script, name)
    found = []
    local = []
    for assignment in accesses[0].referents:
        if not isinstance(assignment, metadata.Assignment):
            return []  # a builtin or an import: not a value read here
        node = assignment.node
        if isinstance(node, cst.Param) or isinstance(script.parents.get(node), cst.Param):
            param = node if isinstance(node, cst.Param) else script.parents[node]
            found += _parameter_values(script, param, depth)
            continue
        value = _assigned_value(script, node)
        if value is None:
            return []  # a for target, an import, a with ... as: unknown
        if assignment.scope is scope:
            local.append((position(script, node), node, value))
        else:  # a module constant read in a function: any of its assignments
            found.append((value, path_condition(script, node)))
    found += _reaching(script, local, use_at, name)
    return found


def _reaching(script, local, use_at, use) -> list:
    """Of a scope's assignments, those that may reach ``use``: the last one before it and,
    when that one is conditional, the ones before it on the other paths."""
    before = sorted((p, n, v) for p, n, v in local if p < use_at)
    if not before:
        return []
    reached, later_tests = [], []
    for _, node, value in reversed(before):
        condition = path_condition(script, node) - path_condition(script, use)
        negated = frozenset((code, not truth) for literals in later_tests for code, truth in literals)
        reached.append((value, condition | negated))
        if not condition:
            break
        if len(condition) == 1:
            later_tests.append(condition)
    return reached


def _assigned_value(script, target):
    """The value assigned to the Name ``target`` by ``target = value`` (None otherwise)."""
    parent = script.parents.get(target)
    if isinstance(parent, cst.AssignTarget):
        statement = script.parents.get(parent)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            return statement.value
    if isinstance(parent, cst.AnnAssign) and parent.value is not None:
        return parent.value
    return None


def _parameter_values(script, param: cst.Param, depth: int) -> list:
    """A function parameter's values: the arguments its calls in this file pass (in the
    caller's scope), or its default where a call leaves it out."""
    function = enclosing_function(script, param)
    if function is None:
        return []
    found = []
    for call in calls_of(script, function):
        argument = _argument_for(function, param, call)
        if argument is None:
            if param.default is None or any(a.star for a in call.args):
                return []  # no value, or one hidden in *args / **kwargs
            found.append((param.default, frozenset()))
        else:
            found.append((argument, path_condition(script, call)))
    return found


def calls_of(script, function: cst.FunctionDef) -> list:
    """The calls of a module-level function by its name, or of a method through ``self.``
    in its own class."""
    index = call_index(script).by_name
    cls = enclosing_class(script, function)
    if cls is None and script.parents.get(function) is script.module:
        return [c for c in index.get(function.name.value, ()) if isinstance(c.func, cst.Name)]
    if cls is not None:
        return [c for c in index.get(function.name.value, ())
                if isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name)
                and c.func.value.value == "self" and enclosing_class(script, c) is cls]
    return []


class CallIndex(cst.CSTVisitor):
    """Every call of a script, read once without metadata: in source order, by the name
    they call (``train`` / ``step``), and by the function (or module) they are in."""

    def __init__(self):
        self.calls, self.by_name, self.in_scope, self.scope_of = [], {}, {}, {}
        self._functions = []

    def visit_FunctionDef(self, node):
        self._functions.append(node)

    def leave_FunctionDef(self, original_node):
        self._functions.pop()

    def visit_Call(self, node):
        scope = self._functions[-1] if self._functions else None
        self.calls.append(node)
        self.scope_of[node] = scope
        self.in_scope.setdefault(scope, []).append(node)
        name = last_name(node.func)
        if name:
            self.by_name.setdefault(name, []).append(node)


_INDEXES: WeakKeyDictionary = WeakKeyDictionary()


def call_index(script) -> CallIndex:
    if script not in _INDEXES:
        index = CallIndex()
        try:
            script.module.visit(index)
        except RecursionError:
            raise UsageError(f"{script.path}: cannot analyse: nested too deeply") from None
        _INDEXES[script] = index
    return _INDEXES[script]


def all_calls(script) -> list:
    """Every call of the script, in source order (computed once per script)."""
    return call_index(script).calls


def calls_in(script, function) -> list:
    """The calls directly in ``function`` (a FunctionDef, or None for module level), not in
    the functions nested in it."""
    return call_index(script).in_scope.get(function, [])


def last_name(func) -> str | None:
    """``AdamW`` for ``torch.optim.AdamW`` or ``AdamW``; None for other callees."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _argument_for(function: cst.FunctionDef, param: cst.Param, call: cst.Call):
    """The expression ``call`` passes for ``param``; None when it passes none by name or
    position (a ``*args``/``**kwargs`` may then hold it: the caller checks)."""
    positional = list(function.params.posonly_params) + list(function.params.params)
    is_method = _is_method(function)
    if is_method and positional and positional[0].name.value == "self":
        positional = positional[1:]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg.value
    if any(arg.star for arg in call.args):
        return None
    plain = [a for a in call.args if a.keyword is None]
    if param in positional and positional.index(param) < len(plain):
        return plain[positional.index(param)].value
    return None


def _is_method(function) -> bool:
    """Whether a def's first parameter is ``self`` or ``cls`` (a method)."""
    params = function.params.params
    return bool(params) and params[0].name.value in ("self", "cls")


def argument(call: cst.Call, keyword: str, index: int | None = None):
    """The expression passed to ``call`` as ``keyword`` (or at position ``index``)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    if index is not None:
        plain = [a for a in call.args if a.keyword is None and not a.star]
        if not any(a.star for a in call.args) and index < len(plain):
            return plain[index].value
    return None


# ----------------------------------------------------------------------------- evaluation
def evaluate(script, expr, leaf, depth: int = 0) -> list:
    """Possible values of ``expr``: ``leaf(script, expr)`` reads a literal (returns a value
    or UNKNOWN); names, conditional expressions and parameters are followed here."""
    if depth > MAX_DEPTH or expr is None:
        return [Possible(UNKNOWN)]
    if isinstance(expr, cst.IfExp):
        (literal,) = test_literals(script, expr.test)
        negated = frozenset({(literal[0], not literal[1])})
        return (conjoin(evaluate(script, expr.body, leaf, depth + 1), {literal})
                + conjoin(evaluate(script, expr.orelse, leaf, depth + 1), negated))
    value = leaf(script, expr)
    if value is not UNKNOWN:
        return [Possible(value, origin=expr)]
    if isinstance(expr, cst.Name):
        found = []
        for bound, condition in bound_values(script, expr, depth + 1):
            found += conjoin(evaluate(script, bound, leaf, depth + 1), condition)
        return found or [Possible(UNKNOWN)]
    return [Possible(UNKNOWN)]


def dtype_literal(script, expr):
    """'float16' for ``torch.float16`` / ``torch.half`` (however imported) or a dtype
    string; UNKNOWN otherwise."""
    if isinstance(expr, (cst.Attribute, cst.Name)):
        for name in script.names_of(expr):
            if name in DTYPE_NAMES:
                return DTYPE_NAMES[name]
    if isinstance(expr, cst.SimpleString):
        return DTYPE_STRINGS.get(expr.evaluated_value, UNKNOWN)
    return UNKNOWN


def dtypes(script, expr, depth: int = 0) -> list:
    return evaluate(script, expr, dtype_literal, depth)


def number_literal(script, expr):
    """A constant number: ``1e-8``, ``-1``, ``10 ** -8``, ``1 / 1e8``; UNKNOWN otherwise."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = number_literal(script, expr.expression)
        if inner is UNKNOWN:
            return UNKNOWN
        return -inner if isinstance(expr.operator, cst.Minus) else inner
    if isinstance(expr, cst.BinaryOperation):
        return _arithmetic(expr.operator, number_literal(script, expr.left), number_literal(script, expr.right))
    return UNKNOWN


def _arithmetic(operator, left, right):
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    try:
        if isinstance(operator, cst.Power):
            return float(left ** right) if abs(right) <= 400 else UNKNOWN
        operation = {cst.Add: float.__add__, cst.Subtract: float.__sub__,
                     cst.Multiply: float.__mul__, cst.Divide: float.__truediv__}.get(type(operator))
        return UNKNOWN if operation is None else operation(left, right)
    except (ArithmeticError, TypeError, ValueError):
        return UNKNOWN


def numbers(script, expr, depth: int = 0) -> list:
    return evaluate(script, expr, _number_or_names, depth)


def _number_or_names(script, expr):
    """A constant number, or arithmetic on names that each hold one known number
    (``EPS * 0.1``)."""
    value = number_literal(script, expr)
    if value is UNKNOWN and isinstance(expr, cst.BinaryOperation):
        left, right = numbers(script, expr.left), numbers(script, expr.right)
        if len(left) == 1 == len(right):
            return _arithmetic(expr.operator, left[0].value, right[0].value)
    return value


def truth_literal(script, expr):
    """True / False for the constants (UNKNOWN otherwise)."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return UNKNOWN


def truths(script, expr, depth: int = 0) -> list:
    """Possible truth values of ``expr``; an unknown test ``x`` becomes True when x is
    true and False when it is false, so that a rule can say under which condition.
    ``dtype == torch.float16`` is decided where ``dtype``'s value is known."""
    expr = _unparenthesized(expr)
    compared = _dtype_comparison(script, expr, depth)
    if compared:
        return compared
    found = evaluate(script, expr, truth_literal, depth)
    if all(p.value is UNKNOWN for p in found) and isinstance(expr, cst.Name) and depth < MAX_DEPTH:
        bound = bound_values(script, expr, depth + 1)
        if len(bound) == 1 and not bound[0][1]:  # use_amp = args.amp: say "--amp"
            return truths(script, bound[0][0], depth + 1)
    if all(p.value is UNKNOWN for p in found):
        (literal,) = test_literals(script, expr)
        return [Possible(True, frozenset({literal})), Possible(False, frozenset({(literal[0], not literal[1])}))]
    return found


def _unparenthesized(expr):
    if getattr(expr, "lpar", None):
        return expr.with_changes(lpar=[], rpar=[]) if not isinstance(expr, cst.Name) else expr
    return expr


def _dtype_comparison(script, expr, depth) -> list:
    """``a == b`` / ``a != b`` / ``a is b`` between dtypes whose values are all known."""
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return []
    (target,) = expr.comparisons
    if not isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        return []
    left, right = dtypes(script, expr.left, depth + 1), dtypes(script, target.comparator, depth + 1)
    if any(p.value is UNKNOWN for p in left + right):
        return []
    equal = isinstance(target.operator, (cst.Equal, cst.Is))
    found = []
    for a in left:
        for b in right:
            both = a.given(b.condition)
            if both is not None:
                found.append(Possible((a.value == b.value) == equal, both.condition))
    return found
