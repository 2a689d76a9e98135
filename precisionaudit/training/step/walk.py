"""The training step, read statically: a path-aware walk over each function's statements
that follows the AMP protocol and emits its events (``events.py``) on each path, for the
step rules to decide on.

Why a walk over paths: the protocol is about order (clip before unscale, update after
step) and the order differs per branch (``if (i + 1) % accum == 0:``, ``if args.fp16:``).
Each ``if`` that contains something AMP-related splits the path on its test's truth; what
cannot be known (a command-line flag) becomes an atom of the path's guard, so a hazard is
reported only on a path the code allows, with the guard in words.

Calls to functions and methods of the same file are followed (``main()`` calling
``train_one_epoch(model, loader, optimizer, scaler)``, ``self.optimizer_step()``), so a
scaler made in one place and used in another keeps what is known about it. A function
nobody in the file calls is walked on its own; a scaler it receives is then assumed
enabled (its owner passed it to be used). Too many paths, recursion, or anything not
understood: silence, never a guess.
"""
from __future__ import annotations

import ast

from ..guards import Atom, known, simplify, subject_of, words
from ..syntax import FUNCTIONS, assigned_in, key_of, method_of, params_of, reads_of, targets_of
from . import owned, protocol
from .calls import MAX_PATHS, MAX_WORK, Calls, TooComplex
from .events import STEP_RULES, Hit
from .forward import evaluate
from .owners import in_play
from .paths import Frame, Path, merge, merged_env
from .values import Autocast, truth

#: the textual prefilter: the step rules need a scaler or an autocast region (a scaler
#: received under another name and never unscaled is missed) and a backward, a clip or a step
AMP_WORDS = ("autocast", "GradScaler", "scaler", "unscale_", "lightning", "ccelerator", "deepspeed", "Fabric",
             "fabric")
STEP_WORDS = ("backward", "clip_grad", ".step(")
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return, ast.Raise, ast.Continue, ast.Break,
           ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete, ast.Assert)
_ENDS = {ast.Raise: "raise", ast.Continue: "continue", ast.Break: "break"}
_SPLITTING = (ast.If, ast.For, ast.AsyncFor, ast.While)


def mentions_amp(text: str) -> bool:
    """Whether the step rules may find anything in a file with this text."""
    return any(w in text for w in AMP_WORDS) and any(w in text for w in STEP_WORDS)


class Report:
    """What a step rule calls to report at ``node`` on the event's path."""

    def __init__(self, walker, rule: str, path: Path):
        self.walker, self.rule, self.path = walker, rule, path

    def __call__(self, node, values: dict, subject: str | None, fix: dict | None = None, drop=frozenset()):
        self.walker.hits.record(self.rule, node, self.path, self.walker.frames, values, subject, fix, drop)


class Hits:
    """Where each step rule fired, over every path that reaches it: ``found`` per (rule,
    node), and the condition under which it holds in words."""

    def __init__(self, script):
        self.script, self.parents = script, script.index.parents
        self.found: dict = {}

    def record(self, rule, node, path, frames, values, subject, fix=None, drop=frozenset()):
        """``rule`` fires at ``node`` on ``path`` (in the function ``frames[-1]``). Literals
        made by the statements that enclose ``node`` (the finding's place implies them) or
        by those in ``drop`` (ids) go unsaid."""
        implied = self._enclosing(node) | drop
        for caller in frames:
            if caller.call is not None:
                implied |= self._enclosing(caller.call)
        guard = frozenset((a, b) for a, b in path.guard if not self._said(a, path.origins.get(a), implied))
        key = (rule, id(node))
        if key not in self.found:
            self.found[key] = Hit(rule, node, values, subject, frames[-1].scope, fix, [])
        elif self.found[key].fix != fix:
            self.found[key].fix = None  # a fix is made only where every path calls for the same one
        self.found[key].guards.append(guard)

    def _said(self, atom, origin, implied) -> bool:
        """True when the if-statement ``origin`` encloses the finding (``implied``) and its
        test names ``atom`` itself: ``if (i + 1) % accum == 0:`` around a step needs no
        "when (i + 1) % accum == 0", but ``if scaler is not None:`` does not say which flag
        made the scaler."""
        if origin is None or id(origin) not in implied:
            return False
        test = getattr(origin, "test", None)
        return test is not None and subject_of(atom) in self.script.text_of(test)

    def _enclosing(self, node) -> set:
        found, current = set(), self.parents.get(node)
        while current is not None:
            if isinstance(current, _SPLITTING):
                found.add(id(current))
            current = self.parents.get(current)
        return found

    def condition(self, hit: Hit) -> str | None:
        """The hit's path condition in words ("when --fp16 is set"); None when always."""
        return words(simplify(hit.guards), self.script.index.flag_atoms)


class Walker:
    """The AMP walk of one script: its statements on each path (calls: ``calls.Calls``), the
    events it emits (``emit``) and the hits the rules record (``hits``)."""

    def __init__(self, script):
        self.script, self.index, self.facts = script, script.index, script.index.step
        self.optimizer_keys = {arg for receiver, arg in self.facts.step_args if receiver in self.facts.scaler_keys}
        self.amp_functions = self.facts.amp_functions()
        self.hits = Hits(script)
        self.frames: list = []
        self.loop_ifs: list = []
        self.work = 0  # statements walked on each path since the entry began
        self.module_env: dict = {}
        self.class_env: dict = {}
        self._reads: dict = {}
        self._assigned: dict = {}
        self.calls = Calls(self)

    def walk(self, body, frame, env, fn=None) -> list:
        """The paths through ``body`` entered with ``env`` as the function ``frame`` (an
        entry point: nobody in the file calls it, or the module's own statements)."""
        path = Path(env=dict(env))
        if fn is not None:
            for param in params_of(fn, frame.cls is not None):
                path.forget(param)
        self.frames = [frame]
        self.loop_ifs = []
        self.work = 0
        try:
            return self.block(body, [path])
        except (TooComplex, RecursionError):
            return []

    def emit(self, event, path: Path):
        for rule, decide in STEP_RULES.get(type(event), ()):
            decide(event, Report(self, rule, path))

    # -- statements ------------------------------------------------------------------------
    def block(self, stmts, paths):
        for stmt in stmts:
            live = [p for p in paths if p.ended is None]
            if not live:
                break
            self.work += len(live)
            if self.work > MAX_WORK:
                raise TooComplex
            paths = [p for p in paths if p.ended is not None] + self._stmt(stmt, live)
            if len(paths) > 4:
                paths = merge(paths)
            if len(paths) > MAX_PATHS:
                raise TooComplex
        return paths

    def _stmt(self, stmt, paths):
        if isinstance(stmt, _SIMPLE):
            return self._simple(stmt, paths)
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            for p in paths:
                p.forget(stmt.name)
            return paths
        if isinstance(stmt, (ast.With, ast.AsyncWith)):  # its context may be an autocast kept in a variable
            return self._with(stmt, paths)
        if id(stmt) not in self.facts.relevant:
            return [self._flat(stmt, p) for p in paths]
        if isinstance(stmt, ast.If):
            return self._if(stmt, paths)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            return self._loop(stmt, paths)
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            return self._try(stmt, paths)
        return [self._flat(stmt, p) for p in paths]

    def _flat(self, stmt, path):
        """A statement with nothing AMP-related: only what it assigns matters, and that
        becomes unknown (its provenance is kept)."""
        keys = self._assigned.get(id(stmt))
        if keys is None:
            keys = self._assigned[id(stmt)] = assigned_in(stmt)
        if keys:
            region = frozenset({path.region}) if path.region else frozenset()
            env = {k: v for k, v in path.env.items() if k not in keys}
            prov = dict(path.prov)
            for key in keys:
                prov[key] = prov.get(key, frozenset()) | region
            path.env, path.prov = env, prov
        return path

    def _if(self, stmt, paths):
        for loop in self.loop_ifs:
            loop.add(id(stmt))
        taken, skipped = [], []
        for p in self.events(stmt.test, paths):
            for test in truth(evaluate(self.script, stmt.test, p)):
                q = p.assume(test.guard, origin=stmt)
                if q is not None:
                    (taken if test.value else skipped).append(q)
        unscaled = protocol.unscaled_when(self.script, stmt.test)
        for q in (taken if unscaled else skipped if unscaled is False else ()):
            q.pending = None  # the scaler's own record says this optimizer was unscaled already
        out = self.block(stmt.body, taken) if taken else []
        if skipped:
            orelse = stmt.orelse
            if len(orelse) == 1 and isinstance(orelse[0], ast.If) and orelse[0].col_offset == stmt.col_offset:
                out += self._if(orelse[0], skipped)  # elif
            elif orelse:
                out += self.block(orelse, skipped)
            else:
                out += skipped
        if len(out) > MAX_PATHS:
            raise TooComplex
        return out

    def _loop(self, stmt, paths):
        """The body walked once per incoming path: one iteration, whose paths are compared
        (a step on some, an update on others: the update runs every micro-step)."""
        out = []
        for p in paths:
            p = p.copy()
            if not isinstance(stmt, ast.While):
                for node in targets_of(stmt.target):
                    key = key_of(node)
                    if key:
                        p.forget(key, provenance=True)
            p.iter_backward = False
            p.marks = []
            inner_ifs: set = set()
            self.loop_ifs.append(inner_ifs)
            try:
                body = self.block(stmt.body, [p])
            finally:
                self.loop_ifs.pop()
            protocol.iteration_end(self, stmt, body, frozenset(inner_ifs))
            for q in body:
                if q.ended in ("continue", "break"):
                    q.ended = None
                out.append(q)
        return out

    def _try(self, stmt, paths):
        """The body (then ``else``) on every path, and each handler from where the body
        began (an exception before it did anything); ``finally`` after all of them."""
        out = self.block(stmt.body, [p.copy() for p in paths])
        if stmt.orelse:
            out = self.block(stmt.orelse, out)
        for handler in stmt.handlers:
            if handler.name:
                entering = [p.copy() for p in paths]
                for p in entering:
                    p.forget(handler.name)
            else:
                entering = [p.copy() for p in paths]
            out += self.block(handler.body, entering)
        if stmt.finalbody:
            out = self.block(stmt.finalbody, out)
        return out

    def _with(self, stmt, paths):
        states = [p.copy() for p in paths]
        for q in states:
            q.depths = q.depths + (len(q.regions),)
        for item in stmt.items:
            entered = []
            for s in self.events(item.context_expr, states):
                for a in evaluate(self.script, item.context_expr, s):
                    q = s.assume(a.guard)
                    if q is None:
                        continue
                    if isinstance(a.value, Autocast):
                        q.regions = q.regions + (a.value,)
                    if item.optional_vars is not None:
                        for node in targets_of(item.optional_vars):
                            key = key_of(node)
                            if key:
                                scaled = method_of(item.context_expr) == "scale_loss"
                                q.bind(key, known(Atom("__scaled__")) if scaled else None)
                    entered.append(q)
            states = entered
        out = self.block(stmt.body, states)
        for q in out:
            q.regions, q.depths = q.regions[:q.depths[-1]], q.depths[:-1]
        return out

    def _simple(self, stmt, paths) -> list:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return self._assign(stmt, paths)
        if isinstance(stmt, ast.Expr):
            return self.events(stmt.value, paths)
        if isinstance(stmt, ast.Return):
            paths = self.events(stmt.value, paths) if stmt.value is not None else paths
            for q in paths:
                if stmt.value is not None:
                    q.ret_prov = self.prov(stmt.value, q)
                q.ended = "return"
            return paths
        ended = _ENDS.get(type(stmt))
        if ended is not None:
            for q in paths:
                q.ended = ended
        return paths

    def _assign(self, stmt, paths) -> list:
        value = stmt.value
        if value is None:
            return paths
        paths = self.events(value, paths)
        plain = isinstance(stmt, ast.Assign)
        targets = stmt.targets if plain else [stmt.target]
        for q in paths:
            prov = self.prov(value, q)
            alternatives = evaluate(self.script, value, q) if plain else None
            handed = owned.prepared_bindings(self, value, targets, q) if plain and in_play(self.script) else {}
            for target in targets:
                nodes = targets_of(target)
                for node in nodes:
                    key = key_of(node)
                    if not key:
                        continue
                    if key in handed:  # an optimizer (or engine) a framework handed back
                        q.bind(key, handed[key], prov)
                    elif isinstance(stmt, ast.AugAssign):
                        q.bind(key, None, q.prov.get(key, frozenset()) | prov)
                    elif len(nodes) == 1 and isinstance(target, (ast.Name, ast.Attribute)):
                        q.bind(key, alternatives, prov)
                    else:
                        q.bind(key, None, prov)
        return paths

    def prov(self, expr, p) -> frozenset:
        """The enabled autocast regions ``expr``'s value was computed under: the one in
        force now, and those of the names it reads."""
        regions = {p.region} if p.region else set()
        reads = self._reads.get(id(expr))
        if reads is None:
            reads = self._reads[id(expr)] = reads_of(expr)
        for key in reads:
            if key in p.prov:
                regions |= p.prov[key]
        if p.ret_prov and any(self.calls.local_callee(c) is not None for c in self.calls.calls_in(expr)):
            regions |= p.ret_prov
        return frozenset(regions)

    def events(self, expr, paths) -> list:
        return self.calls.events(expr, paths)

def walked(script) -> Walker:
    """The script's step walk, made once (``Script.once``) for every step rule and --fix:
    the module's own statements, each class's ``__init__`` (what ``self.`` holds), then every
    function and method nobody in the file calls that reaches an AMP call."""
    walker = Walker(script)
    if not mentions_amp(script.text):
        return walker
    try:
        _entry_points(walker)
    except RecursionError:  # nested deeper than the walk goes: silence, no traceback
        walker.hits.found = {}
    return walker


def _entry_points(walker: Walker):
    index, facts, amp = walker.index, walker.facts, walker.amp_functions
    top = [s for s in walker.script.tree.body if not isinstance(s, (*FUNCTIONS, ast.ClassDef))]
    walker.module_env = merged_env(walker.walk(top, Frame("<module>", None), {}), lambda k: "." not in k)
    for cls, methods in index.methods.items():
        init = methods.get("__init__")
        if init is not None and any(id(m) in amp for m in methods.values()):
            paths = walker.walk(init.body, Frame(f"{cls}.__init__", cls, fn=init), walker.module_env)
            walker.class_env[cls] = merged_env(paths, lambda k: k.startswith("self."))
    for name, fn in index.functions.items():
        if name not in facts.called and id(fn) in amp:
            walker.walk(fn.body, Frame(name, None, fn=fn), walker.module_env, fn)
    for cls, methods in index.methods.items():
        for name, fn in methods.items():
            if name not in facts.called and name != "__init__" and id(fn) in amp:
                env = {**walker.module_env, **walker.class_env.get(cls, {})}
                walker.walk(fn.body, Frame(f"{cls}.{name}", cls, fn=fn), env, fn)


def step_hits(script, rule: str):
    """``rule``'s hits in ``script`` as ``TrainingHit``s (the registry's currency)."""
    from ..registry import TrainingHit

    if not mentions_amp(script.text):
        return
    hits = script.once(walked).hits
    for hit in hits.found.values():
        if hit.rule == rule:
            line, column = script.line_column(hit.node)
            yield TrainingHit(line=line, column=column, values=hit.values, condition=hits.condition(hit),
                              scope=hit.scope, subject=hit.subject, fix={"autofix": False, **(hit.fix or {})})
