"""One pass over a script's ``ast``, made once per script (``Script.index``), that every
analysis reads instead of walking the tree again: each node's parent, every call (in source
order, by the name it calls, by the function it is in), the scopes and what each binds (so
that a name resolves as Python resolves it: ``GS`` after ``from torch.amp import GradScaler
as GS`` is ``torch.amp.GradScaler``), the argparse flags the script declares, and what the
training-step walk needs to know before it starts (which functions reach an AMP call, which
compound statements hold something worth splitting paths on).

Iterative, not recursive: a deeply nested expression does not exhaust Python's stack.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from .syntax import DEFS, FUNCTIONS, children, key_of, last_name, method_of, positional_strings

#: method and function names that make a statement worth splitting paths on
RELEVANT_CALLS = frozenset({"backward", "scale", "step", "update", "unscale_", "zero_grad", "clip_grad_norm_",
                            "clip_grad_value_", "clip_grad_norm", "GradScaler", "ShardedGradScaler", "autocast",
                            # the frameworks' calls that act on the step (training/frameworks)
                            "manual_backward", "clip_gradients", "unscale_gradients"})
RELEVANT_WORDS = ("amp", "fp16", "bf16", "float16", "bfloat16", "half", "dtype", "scaler", "precision",
                  "sync_gradients")
#: what ``parse_args()`` is usually bound to: ``args.fp16`` is the flag ``--fp16``
ARGS_NAMES = frozenset({"args", "opt", "opts", "cli_args"})
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_CONTROL = (ast.Continue, ast.Break, ast.Return, ast.Raise)
_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.cmpop, ast.unaryop)
_BUILTINS = frozenset(dir(builtins))


@dataclass(eq=False)
class Binding:
    """One binding of a name: ``import`` (``target`` the dotted name it stands for),
    ``assign`` (a plain ``name = value``, ``value`` its expression), ``param`` (``node``
    the ``ast.arg``, ``fn`` its function) or ``other`` (a loop target, a def, ``with ... as``,
    a tuple unpacked...)."""

    kind: str
    node: object
    scope: "Scope"
    target: str | None = None
    value: object = None
    fn: object = None


@dataclass(eq=False)
class Scope:
    node: object
    kind: str  # module, function, class, lambda, comprehension
    parent: "Scope | None"
    bindings: dict = field(default_factory=dict)
    globals: set = field(default_factory=set)

    def bind(self, name: str, binding: Binding):
        scope = self
        if name in self.globals:
            while scope.parent is not None:
                scope = scope.parent
            binding.scope = scope
        scope.bindings.setdefault(name, []).append(binding)


class Names:
    """Where each name is bound and read: the scopes, each one's bindings, and the scope
    each read of a name is in; a read resolves as Python resolves it."""

    def __init__(self):
        self.scopes: dict = {}      # scope node -> Scope
        self.read_in: dict = {}     # ast.Name read -> the Scope it is read in
        self._qualified: dict = {}  # node -> its qualified names, once asked (the walk asks often)

    def bindings_of(self, name: ast.Name) -> list[Binding]:
        """Every binding of ``name`` in the scope Python reads it from (its own function's,
        an enclosing function's, then the module's; a class body only from itself)."""
        scope = self.read_in.get(name)
        if scope is None:
            return []
        if name.id in scope.globals:
            while scope.parent is not None:
                scope = scope.parent
        first = True
        while scope is not None:
            if (first or scope.kind != "class") and name.id in scope.bindings:
                return scope.bindings[name.id]
            first, scope = False, scope.parent
        return []

    def qualified(self, node) -> set[str]:
        """The qualified names a Name or attribute chain may stand for: each import that
        binds its root, extended by the attributes (``torch.amp.GradScaler``), a local
        binding as ``<local>.x``, a builtin as ``builtins.x``; empty for anything else."""
        found = self._qualified.get(node)
        if found is None:
            found = self._qualified[node] = self._resolve(node)
        return found

    def _resolve(self, node) -> set[str]:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return set()
        rest = "".join("." + p for p in reversed(parts))
        bindings = self.bindings_of(node)
        if not bindings:
            return {f"builtins.{node.id}{rest}"} if node.id in _BUILTINS and node in self.read_in else set()
        return {f"{b.target}{rest}" if b.kind == "import" else f"<local>.{node.id}{rest}" for b in bindings}


class StepFacts:
    """What the training-step walk needs to know before it starts: which functions reach
    an AMP call (and which call them), which compound statements hold something worth
    splitting paths on, which names are used as scalers and optimizers."""

    def __init__(self, functions: dict, methods: dict):
        self.functions = functions
        self.local_names = set(functions) | {m for ms in methods.values() for m in ms}
        self.relevant: set = set()        # ids of compound statements holding something AMP-related
        self.called: set = set()          # local function / method names called in the file
        self.has_events: set = set()      # ids of functions with an AMP call in their body
        self.callees: dict = {}           # id of function -> local names it calls
        self.defs: dict = {}              # id -> function
        self.self_setters: set = set()    # ids of functions that assign ``self.<attr> = ...``
        self.scaler_keys: set = set()     # names used as scalers (``scaler.unscale_``)
        self.step_args: list = []         # (receiver, argument) of ``x.step(arg)``
        self.engine_keys: set = set()     # receivers of both ``x.backward(loss)`` and ``x.step()``: engines
        self._backward_keys: set = set()
        self._step_keys: set = set()

    def amp_functions(self) -> set:
        """ids of the functions whose walk can meet an AMP event: those with one in their
        body and those calling them (the rest are neither walked nor followed)."""
        relevant = set(self.has_events)
        while True:
            names = {self.defs[i].name for i in relevant}
            grown = {i for i, called in self.callees.items() if called & names} | relevant
            if grown == relevant:
                return relevant
            relevant = grown

    def mark(self, chain):
        """The compound statements around (``chain``, innermost last) are worth splitting on."""
        for node in reversed(chain):
            if id(node) in self.relevant:
                break
            self.relevant.add(id(node))

    def word(self, text: str, chain):
        if chain:
            low = text.lower()
            if any(w in low for w in RELEVANT_WORDS):
                self.mark(chain)

    def call(self, node: ast.Call, name: str | None, fn, chain):
        func = node.func
        if name in RELEVANT_CALLS or name in self.local_names:
            self.mark(chain)
        if fn is not None:
            if name in RELEVANT_CALLS or name == "is_enabled":
                self.has_events.add(id(fn))
            if name in self.local_names:
                self.callees.setdefault(id(fn), set()).add(name)
        if isinstance(func, ast.Name) and func.id in self.functions:
            self.called.add(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and name in self.local_names:
            self.called.add(name)
        if not isinstance(func, ast.Attribute):
            return
        receiver = key_of(func.value)
        if name == "unscale_" and receiver:
            self.scaler_keys.add(receiver)
        if name == "backward" and method_of(func.value) == "scale":
            inner = key_of(func.value.func.value)
            if inner:
                self.scaler_keys.add(inner)
        if name in ("scale", "step", "update") and receiver and receiver.lower().endswith("scaler"):
            self.scaler_keys.add(receiver)
        if receiver and (name == "backward" and node.args or name == "step" and not node.args):
            (self._backward_keys if name == "backward" else self._step_keys).add(receiver)
            if receiver in self._backward_keys and receiver in self._step_keys:
                self.engine_keys.add(receiver)
        if name == "step" and receiver and len(node.args) + len(node.keywords) == 1:
            arg = key_of(node.args[0] if node.args else node.keywords[0].value)
            if arg:
                self.step_args.append((receiver, arg))


class Index:
    """What one pass over the script finds (see the module docstring)."""

    def __init__(self, script):
        self.tree = tree = script.tree
        self.parents: dict = {}
        self.calls: list = []
        self.by_name: dict = {}
        self.in_scope: dict = {}          # function (None: module level) -> calls directly in it
        self.names = Names()
        self.flags: dict = {}             # argparse dest -> "--flag"
        self.flag_defaults: dict = {}     # argparse dest -> its literal ``default=`` expression
        self.field_defaults: dict = {}    # class field name -> [(class, default expression)]
        self.nested: dict = {}            # id of a function -> {name: function defined in its body}
        self.imported: set = set()        # the top-level packages the file imports from
        self.dicts: list = []             # every dict literal, in source order
        self.args_names: set = set(ARGS_NAMES)
        self.functions, self.classes, self.methods = {}, {}, {}
        for stmt in tree.body:
            if isinstance(stmt, FUNCTIONS):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
                self.methods[stmt.name] = {s.name: s for s in stmt.body if isinstance(s, FUNCTIONS)}
        self.step = StepFacts(self.functions, self.methods)
        self.assigns: dict = {}           # function (None: module level) -> [(target, Assign or AugAssign)]
        self._assigned: dict = {}         # Name target of a plain assignment -> its value
        self._walk()
        #: atom -> the flag it is (``args.fp16`` -> ``--fp16``): how a guard names flags
        self.flag_atoms = {f"{head}.{dest}": flag for head in self.args_names for dest, flag in self.flags.items()}

    # -- queries ---------------------------------------------------------------------------
    def names_of(self, node) -> set[str]:
        """``Names.qualified``: ``torch.amp.GradScaler`` for ``GS``."""
        return self.names.qualified(node)

    def bindings_of(self, name: ast.Name) -> list[Binding]:
        return self.names.bindings_of(name)

    def scope_of(self, name: ast.Name):
        return self.names.read_in.get(name)

    def chains(self) -> list[list]:
        """Each name read with the attribute chain built on it, innermost first:
        ``[torch, torch.cuda, torch.cuda.amp, torch.cuda.amp.autocast]``."""
        found = []
        for root in self.names.read_in:
            chain, parent = [root], self.parents.get(root)
            while isinstance(parent, ast.Attribute) and parent.value is chain[-1]:
                chain.append(parent)
                parent = self.parents.get(parent)
            found.append(chain)
        return found

    def function_of(self, node):
        """The function ``node`` is in (None at module level)."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, FUNCTIONS):
            parent = self.parents.get(parent)
        return parent

    def class_of(self, node):
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, ast.ClassDef):
            parent = self.parents.get(parent)
        return parent

    # -- the pass --------------------------------------------------------------------------
    def _walk(self):
        module = Scope(self.tree, "module", None)
        self.names.scopes[self.tree] = module
        stack = [(self.tree, None, module, None, ())]
        while stack:
            node, parent, scope, fn, chain = stack.pop()
            if isinstance(node, _SHARED):
                continue
            self.parents[node] = parent
            inner = self._visit(node, scope, fn, chain)
            if inner is None:
                inner = [(child, scope) for child in children(node)]
            fn_inner = node if isinstance(node, FUNCTIONS) else fn
            chain_inner = chain + (node,) if isinstance(node, _COMPOUND) else chain
            stack.extend((child, node, child_scope, fn_inner, chain_inner) for child, child_scope in reversed(inner))

    def _visit(self, node, scope, fn, chain):
        """Record what ``node`` says; returns its children with the scope each is read in
        when that is not ``scope``."""
        kind = type(node)
        if kind is ast.Name:
            if isinstance(node.ctx, ast.Load):
                self.names.read_in[node] = scope
            elif isinstance(node.ctx, ast.Store):
                value = self._assigned.pop(node, None)
                scope.bind(node.id, Binding("assign", node, scope, value=value) if value is not None
                           else Binding("other", node, scope))
            self.step.word(node.id, chain)
        elif kind is ast.Attribute:
            self.step.word(node.attr, chain)
        elif kind is ast.Call:
            self._call(node, fn, chain)
        elif kind is ast.Dict:
            self.dicts.append(node)
        elif kind is ast.keyword:
            if node.arg:
                self.step.word(node.arg, chain)
        elif kind is ast.Assign:
            self.assigns.setdefault(fn, []).extend((t, node) for t in node.targets)
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self._assigned[node.targets[0]] = node.value
            if fn is not None and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                      and t.value.id == "self" for t in node.targets):
                self.step.self_setters.add(id(fn))
            self._parse_args(node)
        elif kind is ast.AugAssign:
            self.assigns.setdefault(fn, []).append((node.target, node))
        elif kind is ast.AnnAssign:
            if node.value is not None and isinstance(node.target, ast.Name):
                self._assigned[node.target] = node.value
        elif kind in FUNCTIONS or kind is ast.ClassDef or kind is ast.Lambda:
            return self._definition(node, scope, chain)
        elif kind in _COMPREHENSIONS:
            inner = Scope(node, "comprehension", scope)
            self.names.scopes[node] = inner
            first, *rest = node.generators
            out = [(first.iter, scope), (first.target, inner), *((i, inner) for i in first.ifs)]
            for generator in rest:
                out += [(generator.target, inner), (generator.iter, inner), *((i, inner) for i in generator.ifs)]
            elts = [node.key, node.value] if kind is ast.DictComp else [node.elt]
            return [(e, inner) for e in elts] + out
        elif kind is ast.Import or kind is ast.ImportFrom:
            self._import(node, scope, chain)
        elif kind is ast.ExceptHandler:
            if node.name:
                scope.bind(node.name, Binding("other", node, scope))
                self.step.word(node.name, chain)
        elif kind is ast.Global or kind is ast.Nonlocal:
            if kind is ast.Global:
                scope.globals.update(node.names)
            for name in node.names:
                self.step.word(name, chain)
        elif kind in _CONTROL:
            self.step.mark(chain)
        return None

    def _definition(self, node, scope, chain):
        if not isinstance(node, ast.Lambda):
            scope.bind(node.name, Binding("other", node, scope))
            self.step.word(node.name, chain)
        if isinstance(node, ast.ClassDef):
            for name, default in string_fields(node):
                self.field_defaults.setdefault(name, []).append((node, default))
            inner = Scope(node, "class", scope)
            self.names.scopes[node] = inner
            return [*((d, scope) for d in node.decorator_list), *((b, scope) for b in node.bases),
                    *((k, scope) for k in node.keywords), *((s, inner) for s in node.body)]
        inner = Scope(node, "function" if not isinstance(node, ast.Lambda) else "lambda", scope)
        self.names.scopes[node] = inner
        if not isinstance(node, ast.Lambda):
            self.step.defs[id(node)] = node
            if scope.kind == "function":  # a helper defined inside a function, called there
                self.nested.setdefault(id(scope.node), {})[node.name] = node
                self.step.local_names.add(node.name)
        a = node.args
        for arg in (*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs,
                    *([a.kwarg] if a.kwarg else [])):
            inner.bind(arg.arg, Binding("param", arg, inner, fn=node))
            self.step.word(arg.arg, chain)
        outer = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if isinstance(node, ast.Lambda):
            return [*((d, scope) for d in outer), (node.body, inner)]
        annotations = [x.annotation for x in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg)
                       if x is not None and x.annotation is not None]
        return [*((d, scope) for d in node.decorator_list), *((d, scope) for d in outer),
                *((x, scope) for x in annotations), *([(node.returns, scope)] if node.returns else []),
                *((s, inner) for s in node.body)]

    def _import(self, node, scope, chain):
        module = ""
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if not node.level and node.module:
                self.imported.add(node.module.split(".")[0])
            for part in (node.module or "").split("."):
                self.step.word(part, chain)
        else:
            self.imported.update(alias.name.split(".")[0] for alias in node.names)
        for alias in node.names:
            for part in alias.name.split("."):
                self.step.word(part, chain)
            if alias.asname:
                self.step.word(alias.asname, chain)
            if alias.name == "*":
                continue
            if isinstance(node, ast.Import):
                bound = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else bound
            else:
                bound = alias.asname or alias.name
                target = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            scope.bind(bound, Binding("import", alias, scope, target=target))

    def _parse_args(self, node: ast.Assign):
        """``cfg = parser.parse_args()``: ``cfg.fp16`` is a flag too."""
        value = node.value
        if isinstance(value, ast.Subscript):  # parser.parse_known_args()[0]
            value = value.value
        if method_of(value) in ("parse_args", "parse_known_args"):
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            if isinstance(target, ast.Name):
                self.args_names.add(target.id)

    def _call(self, node: ast.Call, fn, chain):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        self.calls.append(node)
        if name:
            self.by_name.setdefault(name, []).append(node)
        self.in_scope.setdefault(fn, []).append(node)
        self.step.call(node, name, fn, chain)
        if name == "add_argument":
            self._flag(node)

    def _flag(self, node: ast.Call):
        long = [f for f in positional_strings(node) if f.startswith("--")]
        if not long:
            return
        dest = next((k.value for k in node.keywords if k.arg == "dest"), None)
        name = dest.value if isinstance(dest, ast.Constant) and isinstance(dest.value, str) \
            else long[0][2:].replace("-", "_")
        self.flags[name] = long[0]
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if isinstance(default, ast.Constant) and isinstance(default.value, str):
            self.flag_defaults[name] = default


def string_fields(cls: ast.ClassDef) -> list:
    """(name, default) of the string defaults a class body declares (``dtype: str =
    "bfloat16"``, a dataclass's ``field(default="bf16")``): what a config object holds
    unless told otherwise."""
    found = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and last_name(value.func) == "field":
            value = next((k.value for k in value.keywords if k.arg == "default"), None)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append((stmt.target.id, value))
    return found


__all__ = ["Binding", "DEFS", "Index", "Names", "Scope", "StepFacts"]
