"""The training step, read statically: a path-aware walk over each function's statements
that follows the AMP protocol (autocast regions and their dtype, scaled and plain
backward passes, ``unscale_``, gradient clipping, ``scaler.step``, ``update``, plain
``optimizer.step()``) and records where a rule's hazard holds and under which condition.

Why a walk over paths: the protocol is about order (clip before unscale, update after
step) and the order differs per branch (``if (i + 1) % accum == 0:``, ``if args.fp16:``).
Each ``if`` that contains something AMP-related splits the path on its test's truth;
what cannot be known (a command-line flag) becomes an atom of the path's guard, so a
hazard is reported only on a path the code allows, with the guard in words.

Calls to functions and methods of the same file are followed (``main()`` calling
``train_one_epoch(model, loader, optimizer, scaler)``, ``self.optimizer_step()``), so a
scaler made in one place and used in another keeps what is known about it. A function
nobody in the file calls is walked on its own; a scaler it receives is then assumed
enabled (its owner passed it to be used). Too many paths, recursion, or anything not
understood: silence, never a guess.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

import libcst as cst
from libcst import metadata

from .step_syntax import (AUTOCASTS, CLIPS, DEFAULT_AUTOCAST_DTYPE, DTYPES, MEMO, SCALERS, StepIndex, arg_of,
                          assigned_in, bind_args, calls_in_order, key_of, mentions_amp, method_name_of, method_of,
                          params_of, positional, reads_of, targets_of, text_of)
from .step_values import (TRUE_GUARD, Atom, Autocast, Dtype, Scaler, Table, combine, join, known, negate,
                     simplify, truth)

#: more paths than this through one entry function: the function is left alone
MAX_PATHS = 256
#: calls followed into their callee, at most this deep
MAX_INLINE_DEPTH = 4


@dataclass
class Hit:
    """One place a rule fires, over every path that reaches it."""

    rule: str
    node: object
    values: dict
    guards: list = field(default_factory=list)
    scope: str = ""
    fix: dict | None = None


@dataclass
class Path:
    """One way through the code so far: what is assumed, known, and done."""

    guard: frozenset = TRUE_GUARD
    origins: dict = field(default_factory=dict)   # atom -> the if/while node whose test made it
    env: dict = field(default_factory=dict)       # name or self.attr -> value alternatives
    prov: dict = field(default_factory=dict)      # name -> frozenset of enabled Autocast regions
    regions: tuple = ()                           # the autocast stack (innermost last)
    pending: tuple | None = None                  # (scaler, scale call, scaler text, function) of scaled grads not unscaled
    backward: str | None = None                   # "plain" / "scaled": the last backward since a step
    stepped: dict = field(default_factory=dict)   # optimizer text -> scaler.step node, since update()
    scaler_opts: dict = field(default_factory=dict)  # optimizer text -> scaler.step node on this path
    plain_steps: dict = field(default_factory=dict)  # optimizer text -> plain opt.step() node
    iter_backward: bool = False                   # a backward ran in this loop iteration
    marks: list = field(default_factory=list)     # (kind, node, scaler) since the loop's iteration began
    ret_prov: frozenset = frozenset()
    callers: tuple = ()                           # (env, prov) of each caller, while in a callee
    depths: tuple = ()                            # the autocast stack's depth at each open with
    ended: str | None = None                      # "return" / "raise" / "continue" / "break"

    def copy(self) -> "Path":
        return replace(self, origins=dict(self.origins), env=dict(self.env), prov=dict(self.prov),
                       stepped=dict(self.stepped), scaler_opts=dict(self.scaler_opts),
                       plain_steps=dict(self.plain_steps), marks=list(self.marks))

    def assume(self, guard: frozenset, origin=None) -> "Path | None":
        merged = join(self.guard, guard)
        if merged is None:
            return None
        path = self.copy()
        path.guard = merged
        for atom, _ in guard - self.guard:
            if origin is not None:
                path.origins[atom] = origin
        return path

    @property
    def region(self):
        """The autocast region in force (None: autocast off or disabled here)."""
        if not self.regions:
            return None
        inner = self.regions[-1]
        return inner if inner.enabled else None


class TooComplex(Exception):
    """The walk gave up (too many paths): the function gives no finding."""


@dataclass
class Frame:
    """A function being walked: its scope name (``Trainer.training_step``), its class, and
    its definition (the frames on the stack are never entered again: no recursion)."""

    scope: str
    cls: str | None
    fn: object = None
    #: the call that entered this function (None for an entry point)
    call: object = None


class StepAnalysis:
    """The AMP facts of one script: ``hits`` per rule, computed once and shared by the rules."""

    def __init__(self, script):
        self.script = script
        self.module = script.module
        self.functions: dict = {}
        self.methods: dict = {}
        self.classes: dict = {}
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef):
                self.classes[stmt.name.value] = stmt
                self.methods[stmt.name.value] = {
                    s.name.value: s for s in stmt.body.body if isinstance(s, cst.FunctionDef)}
        self.index = StepIndex(self.module, self.functions, self.methods)
        self.module.visit(self.index)
        self.optimizer_keys = {arg for receiver, arg in self.index.step_args if receiver in self.index.scaler_keys}
        self.amp_functions = self.index.amp_functions()
        self.qualified = self._qualified_names()
        self.hits: dict = {}
        self.frames: list = []
        self.loop_ifs: list = []
        self.module_env: dict = {}
        self.class_env: dict = {}
        self._run()

    def _qualified_names(self):
        """LibCST's qualified names for the part of the file the walk reads: the top-level
        statements (imports, constants, the ``__main__`` block) and the functions and
        methods that reach an AMP call. Name resolution is most of a scan's time, and in a
        5,000-line library module the AMP code is a few functions; the nodes are the
        script's own, so the resolved names are theirs."""
        body = []
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef):
                if id(stmt) in self.amp_functions:
                    body.append(stmt)
            elif isinstance(stmt, cst.ClassDef):
                kept = [m for m in stmt.body.body if isinstance(m, cst.FunctionDef) and id(m) in self.amp_functions]
                if kept:
                    kept += [m for m in stmt.body.body if isinstance(m, cst.FunctionDef) and m not in kept
                             and id(m) in self.index.self_setters]
                    init = self.methods[stmt.name.value].get("__init__")
                    if init is not None and init not in kept:
                        kept.insert(0, init)
                    body.append(stmt.with_changes(body=stmt.body.with_changes(body=kept)))
            else:
                body.append(stmt)
        pruned = self.module.with_changes(body=body)
        try:
            return metadata.MetadataWrapper(pruned, unsafe_skip_copy=True).resolve(metadata.QualifiedNameProvider)
        except RecursionError:
            return {}

    def names_of(self, node) -> set:
        """The qualified names ``node`` may stand for (``torch.amp.GradScaler`` for ``GS``)."""
        names = self.qualified.get(node, ())
        if callable(names):  # resolved lazily (a LazyValue)
            names = names()
        return {q.name for q in names}

    # -- entry points ----------------------------------------------------------------------
    def _run(self):
        top = [s for s in self.module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))]
        paths = self._entry(top, Frame("<module>", None), {})
        self.module_env = _merged_env(paths, lambda k: "." not in k)
        for cls, methods in self.methods.items():
            init = methods.get("__init__")
            if init is not None and any(id(m) in self.amp_functions for m in methods.values()):
                paths = self._entry(init.body.body, Frame(f"{cls}.__init__", cls, fn=init), self.module_env)
                self.class_env[cls] = _merged_env(paths, lambda k: k.startswith("self."))
        called = self.index.called
        for name, fn in self.functions.items():
            if name not in called and id(fn) in self.amp_functions:
                self._entry(fn.body.body, Frame(name, None, fn=fn), self.module_env, fn)
        for cls, methods in self.methods.items():
            for name, fn in methods.items():
                if name not in called and name != "__init__" and id(fn) in self.amp_functions:
                    env = {**self.module_env, **self.class_env.get(cls, {})}
                    self._entry(fn.body.body, Frame(f"{cls}.{name}", cls, fn=fn), env, fn)

    def _entry(self, body, frame, env, fn=None):
        path = Path(env=dict(env))
        if fn is not None:
            for param in params_of(fn, frame.cls is not None):
                path.env.pop(param, None)
        self.frames = [frame]
        self.loop_ifs = []
        try:
            paths = self._block(body, [path])
        except (TooComplex, RecursionError):
            return []
        return paths

    # -- hits ------------------------------------------------------------------------------
    def hit(self, rule, node, path, values, fix=None, drop=frozenset()):
        """Record ``rule`` firing at ``node`` on ``path``. Literals made by the statements
        that enclose ``node`` (the finding's place implies them) or by those in ``drop``
        (ids) go unsaid."""
        frame = self.frames[-1]
        implied = self._enclosing(node) | drop
        for caller in self.frames:
            if caller.call is not None:
                implied |= self._enclosing(caller.call)
        guard = frozenset((a, b) for a, b in path.guard if not self._said(a, path.origins.get(a), implied))
        key = (rule, id(node))
        if key not in self.hits:
            self.hits[key] = Hit(rule, node, values, [], frame.scope, fix)
        self.hits[key].guards.append(guard)

    def _said(self, atom, origin, implied) -> bool:
        """True when the if-statement ``origin`` encloses the finding (``implied``) and its
        test names ``atom`` itself: ``if (i + 1) % accum == 0:`` around a step needs no
        "when (i + 1) % accum == 0", but ``if scaler is not None:`` does not say which flag
        made the scaler."""
        if origin is None or id(origin) not in implied:
            return False
        test = getattr(origin, "test", None)
        return test is not None and atom in text_of(self.module, test)

    def _enclosing(self, node) -> set:
        parents = self.script.parents
        found, current = set(), node
        while True:
            current = parents.get(current)
            if current is None:
                return found
            if isinstance(current, (cst.If, cst.For, cst.While)):
                found.add(id(current))

    def condition(self, hit) -> str | None:
        """The hit's path condition in words ("when --fp16 is set"); None when always."""
        guard = simplify(hit.guards)
        if not guard:
            return None
        return "when " + " and ".join(self._words(a, b) for a, b in sorted(guard, key=repr))

    def _words(self, atom, value):
        if not isinstance(value, bool):  # a table key: ``cf.attention_dtype == 'bf16'``
            return f"{atom} {value!r}"
        head, _, attr = atom.partition(".")
        if head in ("args", "opt", "opts", "cli_args") and attr in self.index.flags:
            return f"{self.index.flags[attr]} is {'set' if value else 'not set'}"
        if all(part.isidentifier() for part in atom.split(".")):
            return f"{atom} is {'true' if value else 'false'}"
        return atom if value else f"not ({atom})"

    # -- statements ------------------------------------------------------------------------
    def _block(self, stmts, paths):
        for stmt in stmts:
            live = [p for p in paths if p.ended is None]
            if not live:
                break
            done = [p for p in paths if p.ended is not None]
            paths = done + self._stmt(stmt, live)
            if len(paths) > 4:
                paths = _merge(paths)
            if len(paths) > MAX_PATHS:
                raise TooComplex
        return paths

    def _stmt(self, stmt, paths):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                live = [p for p in paths if p.ended is None]
                paths = [p for p in paths if p.ended is not None] + (self._small(small, live) if live else [])
            return paths
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            for p in paths:
                p.env.pop(stmt.name.value, None)
            return paths
        if isinstance(stmt, cst.With):  # its context may be an autocast kept in a variable
            return self._with(stmt, paths)
        relevant = id(stmt) in self.index.relevant
        if not relevant:
            return [self._flat(stmt, p) for p in paths]
        if isinstance(stmt, cst.If):
            return self._if(stmt, paths)
        if isinstance(stmt, (cst.For, cst.While)):
            return self._loop(stmt, paths)
        if isinstance(stmt, cst.With):
            return self._with(stmt, paths)
        if isinstance(stmt, cst.Try):
            paths = self._block(stmt.body.body, paths)
            if stmt.orelse is not None:
                paths = self._block(stmt.orelse.body.body, paths)
            if stmt.finalbody is not None:
                paths = self._block(stmt.finalbody.body.body, paths)
            return paths
        return [self._flat(stmt, p) for p in paths]

    def _flat(self, stmt, path):
        """A statement with nothing AMP-related: only what it assigns matters, and that
        becomes unknown (its provenance is kept)."""
        region = path.region
        for node in assigned_in(stmt):
            key = key_of(self.module, node)
            if key:
                path.env.pop(key, None)
                path.prov[key] = path.prov.get(key, frozenset()) | (frozenset({region}) if region else frozenset())
        return path

    def _if(self, stmt, paths):
        for loop in self.loop_ifs:
            loop.add(id(stmt))
        taken, skipped = [], []
        for p in self._events(stmt.test, paths):
            for guard, value in truth(self._eval(stmt.test, p)):
                q = p.assume(guard, origin=stmt)
                if q is not None:
                    (taken if value else skipped).append(q)
        out = self._block(stmt.body.body, taken) if taken else []
        if skipped:
            if isinstance(stmt.orelse, cst.If):
                out += self._if(stmt.orelse, skipped)
            elif stmt.orelse is not None:
                out += self._block(stmt.orelse.body.body, skipped)
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
            if isinstance(stmt, cst.For):
                for node in targets_of(stmt.target):
                    key = key_of(self.module, node)
                    if key:
                        p.env.pop(key, None)
                        p.prov.pop(key, None)
            p.iter_backward = False
            p.marks = []
            inner_ifs: set = set()
            self.loop_ifs.append(inner_ifs)
            try:
                body = self._block(stmt.body.body, [p])
            finally:
                self.loop_ifs.pop()
            self._iteration_end(stmt, body, inner_ifs)
            for q in body:
                if q.ended in ("continue", "break"):
                    q.ended = None
                out.append(q)
        return out

    def _iteration_end(self, loop, body, inner_ifs):
        """PA402 at the end of one loop iteration: a scaler.step not followed by update()
        (the next iteration's step raises), and update()/unscale_() on micro-steps that
        do not step while others do (gradient accumulation)."""
        ended = [q for q in body if q.ended in (None, "continue")]
        stepping = any(kind == "step" for q in ended for kind, _, _ in q.marks)
        for q in ended:
            if q.iter_backward:
                for node in q.stepped.values():
                    self.hit("PA402", node, q, {"call": text_of(self.module, node), "problem":
                             "no update() follows this step on this path, so the next iteration's "
                             "scaler.step raises \"step() has already been called since the last update()\"",
                             "remedy": "call scaler.update() once after every scaler.step(optimizer) of the iteration"})
            kinds = [kind for kind, _, _ in q.marks]
            if not stepping or "step" in kinds:
                continue
            zeroed = "zero_grad" in kinds  # a skipped step that drops its gradients accumulates nothing
            for i, (kind, node, _) in enumerate(q.marks):
                updated_after = "update" in kinds[i + 1:]
                if kind == "update" and not zeroed:
                    problem = ("update() runs on micro-steps where scaler.step does not (gradient accumulation): "
                               "the scale changes while gradients accumulate")
                elif kind == "unscale_" and not zeroed:
                    problem = ("unscale_() runs on micro-steps where scaler.step does not (gradient accumulation): "
                               "gradients are unscaled in place and the next backward adds scaled ones to them")
                elif kind == "unscale_" and not updated_after:
                    problem = ("unscale_() runs on an iteration that neither steps nor calls update(): the next "
                               "unscale_() raises \"unscale_() has already been called on this optimizer since "
                               "the last update()\"")
                else:
                    continue
                self.hit("PA402", node, q, {"call": text_of(self.module, node), "problem": problem,
                                            "remedy": f"call {kind}() only on the iterations that call scaler.step"
                                            if not zeroed else "call scaler.update() on every iteration that unscaled"},
                         drop=frozenset(inner_ifs))

    def _with(self, stmt, paths):
        states = [p.copy() for p in paths]
        for q in states:
            q.depths = q.depths + (len(q.regions),)
        for item in stmt.items:
            entered = []
            for s2 in self._events(item.item, states):
                for guard, value in self._eval(item.item, s2):
                    q = s2.assume(guard)
                    if q is None:
                        continue
                    if isinstance(value, Autocast):
                        q.regions = q.regions + (value,)
                    if item.asname is not None:
                        for node in targets_of(item.asname.name):
                            key = key_of(self.module, node)
                            if key:
                                q.env.pop(key, None)
                                if method_name_of(item.item) == "scale_loss":
                                    q.env[key] = known(Atom("__scaled__"))
                    entered.append(q)
            states = entered
        out = self._block(stmt.body.body, states)
        for q in out:
            q.regions, q.depths = q.regions[:q.depths[-1]], q.depths[:-1]
        return out

    def _small(self, small, paths) -> list:
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            value = small.value
            if value is None:
                return paths
            paths = self._events(value, paths)
            targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target])
            out = []
            for q in paths:
                prov = self._prov(value, q)
                alts = self._eval(value, q) if isinstance(small, cst.Assign) else None
                for target in targets:
                    nodes = targets_of(target)
                    for node in nodes:
                        key = key_of(self.module, node)
                        if not key:
                            continue
                        if isinstance(small, cst.AugAssign):
                            q.prov[key] = q.prov.get(key, frozenset()) | prov
                            q.env.pop(key, None)
                        else:
                            q.prov[key] = prov
                            if alts is not None and len(nodes) == 1 and isinstance(target, (cst.Name, cst.Attribute)):
                                q.env[key] = alts
                            else:
                                q.env.pop(key, None)
                out.append(q)
            return out
        if isinstance(small, cst.Expr):
            return self._events(small.value, paths)
        if isinstance(small, cst.Return):
            paths = self._events(small.value, paths) if small.value is not None else paths
            for q in paths:
                if small.value is not None:
                    q.ret_prov = self._prov(small.value, q)
                q.ended = "return"
            return paths
        ended = {cst.Raise: "raise", cst.Continue: "continue", cst.Break: "break"}.get(type(small))
        if ended is not None:
            for q in paths:
                q.ended = ended
        return paths

    def _prov(self, expr, p) -> frozenset:
        """The enabled autocast regions ``expr``'s value was computed under: the one in
        force now, and those of the names it reads."""
        regions = {p.region} if p.region else set()
        for node in reads_of(expr):
            key = key_of(self.module, node)
            if key and key in p.prov:
                regions |= p.prov[key]
        if p.ret_prov and _calls_local(expr, self):
            regions |= p.ret_prov
        return frozenset(regions)

    # -- expressions: the events, in evaluation order --------------------------------------
    def _events(self, expr, paths) -> list:
        """The paths after the calls in ``expr`` ran, in evaluation order. A call into a
        function of this file is walked once for all the paths that reach it."""
        for call in calls_in_order(expr):
            live = [p for p in paths if p.ended is None]
            done = [p for p in paths if p.ended is not None]
            target = self._local_callee(call)
            if target is not None:
                paths = done + self._inline(target, call, live)
            else:
                paths = done + [q for p in live for q in self._call(call, p)]
            if len(paths) > MAX_PATHS:
                raise TooComplex
        return paths

    def _call(self, call, p) -> list:
        names = self.names_of(call.func)
        method = method_of(call)
        if names & CLIPS:
            return self._clip(call, p)
        if method == "backward" and not positional(call):
            return self._backward(call, p)
        if method == "zero_grad":
            p.marks.append(("zero_grad", call, None))
            return [p]
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if method in ("unscale_", "step", "update") and receiver is not None:
            scalers = self._scalers(receiver, p)
            if scalers:
                return self._scaler_call(method, call, receiver, scalers, p)
            if method == "step" and not call.args:
                key = key_of(self.module, receiver)
                if key in self.optimizer_keys:
                    node = p.scaler_opts.get(key)
                    if node is not None:
                        self._plain_beside(call, key, p)
                    p.plain_steps[key] = call
            return [p]
        return [p]

    def _scalers(self, receiver, p):
        """The scaler ``receiver`` is on this path, as alternatives (empty: not a scaler)."""
        key = key_of(self.module, receiver)
        alts = p.env.get(key) if key else None
        if alts and any(isinstance(v, Scaler) for _, v in alts):
            return [(g, v) for g, v in alts if isinstance(v, Scaler)]
        if key in self.index.scaler_keys and not alts:
            return [(TRUE_GUARD, Scaler(None, True, key))]
        return []

    def _scaler_call(self, method, call, receiver, scalers, p) -> list:
        out = []
        for guard, scaler in scalers:
            q = p.assume(guard)
            if q is None:
                continue
            out.append(q)
            if not scaler.enabled:  # a disabled scaler's step is optimizer.step(); the rest no-ops
                if method == "step":
                    q.pending, q.backward = None, None
                continue
            if method == "unscale_":
                q.pending = None
            elif method == "step":
                opt = key_of(self.module, call.args[0].value) if call.args else None
                if q.backward == "plain":
                    self.hit("PA402", call, q, {
                        "call": text_of(self.module, call),
                        "problem": "the backward before it on this path was not scaled, so step() divides "
                                   "unscaled gradients by the loss scale",
                        "remedy": f"call {text_of(self.module, receiver)}.scale(loss).backward()"})
                if opt is not None:
                    if opt in q.plain_steps:
                        self._plain_beside(q.plain_steps[opt], opt, q)
                    q.stepped[opt] = call
                    q.scaler_opts[opt] = call
                q.pending, q.backward = None, None
            elif method == "update":
                q.stepped = {}
            q.marks.append((method, call, scaler))
        return out

    def _clip(self, call, p) -> list:
        if p.pending is not None:
            scaler, _, text, fn = p.pending
            clip = text_of(self.module, call.func)
            values = {"clip": clip, "scaler": text, "optimizer": "optimizer"}
            optimizer = self._optimizer_after(call, text) if fn is self.frames[-1].fn else None
            fix = None
            if optimizer is not None:
                values["optimizer"] = optimizer
                fix = {"autofix": True, "insert": f"{text}.unscale_({optimizer})"}
            self.hit("PA401", call, p, values, fix=fix)
        return [p]

    def _optimizer_after(self, clip, scaler_text) -> str | None:
        """The one optimizer ``scaler_text.step(...)`` steps after ``clip`` in the same
        function (None: none or several): what the inserted ``unscale_`` must name."""
        fn = self.frames[-1].fn
        if fn is None:
            return None
        line = self.script.line_column(clip)[0]
        loop = self._loop_of(clip)
        found = set()
        for node in calls_in_order(fn.body):
            if method_of(node) == "step" and len(node.args) == 1 and \
                    key_of(self.module, node.func.value) == scaler_text and self.script.line_column(node)[0] > line \
                    and self._loop_of(node) is loop:
                found.add(text_of(self.module, node.args[0].value))
        return found.pop() if len(found) == 1 else None

    def _loop_of(self, node):
        """The innermost loop around ``node`` (a step in a nested ``for opt in opts:``
        does not name the optimizer at the clip)."""
        current = self.script.parents.get(node)
        while current is not None and not isinstance(current, (cst.For, cst.While, cst.FunctionDef)):
            current = self.script.parents.get(current)
        return current

    def _backward(self, call, p) -> list:
        receiver = call.func.value
        out = []
        if isinstance(receiver, cst.Call) and method_of(receiver) == "scale" and receiver.args:
            scalers = self._scalers(receiver.func.value, p)
            loss = receiver.args[0].value
            text = text_of(self.module, receiver.func.value)
        else:
            scalers, loss, text = [], receiver, None
            key = key_of(self.module, receiver)
            if key and any(isinstance(v, Atom) and v.text == "__scaled__" for _, v in p.env.get(key, ())):
                return [p]  # apex's ``with amp.scale_loss(loss, opt) as scaled:``
        alternatives = [(g, s) for g, s in scalers] or [(TRUE_GUARD, None)]
        for guard, scaler in alternatives:
            q = p.assume(guard)
            if q is None:
                continue
            scaled = scaler is not None and scaler.enabled
            regions = self._prov(loss, q)
            if q.region is not None:
                self.hit("PA408", call, q, {"backward": text_of(self.module, call.func),
                                            "autocast": text_of(self.module, q.region.node)})
            fp16 = [r for r in regions if r.dtype == "float16"]
            if fp16 and not scaled:
                self.hit("PA403", call, q, {"backward": text_of(self.module, call.func),
                                            "autocast": text_of(self.module, fp16[0].node)})
            if scaled and scaler.node is not None and regions and all(r.dtype == "bfloat16" for r in regions):
                region = next(iter(regions))
                self.hit("PA404", scaler.node, q, {"scaler": text_of(self.module, scaler.node.func),
                                                   "autocast": text_of(self.module, region.node)})
            if scaled:
                q.pending = (scaler, receiver, text, self.frames[-1].fn)
                q.backward = "scaled"
            elif q.backward != "scaled":
                q.backward = "plain"
            q.iter_backward = True
            out.append(q)
        return out

    def _plain_beside(self, call, key, p):
        self.hit("PA402", call, p, {
            "call": text_of(self.module, call),
            "problem": f"a plain {key}.step() runs beside scaler.step({key}) on the same path: the optimizer "
                       "steps twice, once on gradients still multiplied by the loss scale",
            "remedy": f"step {key} only through scaler.step({key})"})

    # -- calls into the same file ----------------------------------------------------------
    def _local_callee(self, call):
        func = call.func
        frame = self.frames[-1]
        if isinstance(func, cst.Name) and func.value in self.functions:
            return self.functions[func.value], None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and frame.cls is not None and func.attr.value in self.methods.get(frame.cls, {}):
            return self.methods[frame.cls][func.attr.value], frame.cls
        return None

    def _inline(self, target, call, paths) -> list:
        fn, cls = target
        if id(fn) not in self.amp_functions and not (cls is not None and id(fn) in self.index.self_setters):
            return paths  # a method that sets self.<attr> is followed: it may set the dtype or the scaler
        if len(self.frames) > MAX_INLINE_DEPTH or any(f.fn is fn for f in self.frames):
            return paths
        entering = []
        for p in paths:
            q = p.copy()
            q.callers = p.callers + ((p.env, p.prov),)
            q.env = {**self.module_env, **{k: v for k, v in p.env.items() if k.startswith("self.")}}
            q.prov = {k: v for k, v in p.prov.items() if k.startswith("self.")}
            for param in params_of(fn, cls is not None):
                q.env.pop(param, None)
            for param, arg in bind_args(fn, call, cls is not None):
                q.env[param] = self._eval(arg, p)
                q.prov[param] = self._prov(arg, p)
            q.ret_prov = frozenset()
            entering.append(q)
        scope = f"{cls}.{fn.name.value}" if cls else fn.name.value
        self.frames.append(Frame(scope, cls if cls else self.frames[-1].cls, fn=fn, call=call))
        saved_loops = self.loop_ifs
        self.loop_ifs = []
        try:
            walked = self._block(fn.body.body, entering)
        finally:
            self.frames.pop()
            self.loop_ifs = saved_loops
        out = []
        for r in walked:
            if r.ended == "raise":
                continue
            r.ended = None
            (caller_env, caller_prov), r.callers = r.callers[-1], r.callers[:-1]
            env = dict(caller_env)
            env.update({k: v for k, v in r.env.items() if k.startswith("self.")})
            prov = dict(caller_prov)
            prov.update({k: v for k, v in r.prov.items() if k.startswith("self.")})
            r.env, r.prov = env, prov
            out.append(r)
        return out

    # -- values ----------------------------------------------------------------------------
    def _eval(self, expr, p) -> tuple:
        """``expr``'s value alternatives on path ``p`` (an Atom for what cannot be known)."""
        module = self.module
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return known({"True": True, "False": False, "None": None}[expr.value])
            if expr.value == "__name__":
                return known("__main__")
        if isinstance(expr, (cst.Name, cst.Attribute)):
            names = self.names_of(expr)
            for name in names:
                if name in DTYPES:
                    return known(Dtype(DTYPES[name]))
            key = key_of(module, expr)
            if key and key in p.env:
                return p.env[key]
            return known(Atom(text_of(module, expr)))
        if isinstance(expr, cst.SimpleString):
            return known(ast.literal_eval(expr.value))
        if isinstance(expr, cst.ConcatenatedString):
            return known(Atom(text_of(module, expr)))
        if isinstance(expr, cst.IfExp):
            out = []
            for guard, value in truth(self._eval(expr.test, p)):
                branch = self._eval(expr.body if value else expr.orelse, p)
                out += [(g, v) for g, v in ((join(guard, g2), v2) for g2, v2 in branch) if g is not None]
            return tuple(out)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return tuple(negate(truth(self._eval(expr.expression, p))))
        if isinstance(expr, cst.BooleanOperation):
            left = truth(self._eval(expr.left, p))
            right = truth(self._eval(expr.right, p))
            op = (lambda a, b: a and b) if isinstance(expr.operator, cst.And) else (lambda a, b: a or b)
            return tuple(combine(left, right, op))
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            return self._compare(expr, p)
        if isinstance(expr, cst.Dict):
            return self._table(expr, p)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            return self._lookup(expr, p)
        if isinstance(expr, cst.Call) and method_of(expr) == "is_enabled" and not expr.args:
            scalers = self._scalers(expr.func.value, p)
            if scalers:
                return tuple((g, s.enabled) for g, s in scalers)
        if isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].keyword and (
                self.names_of(expr.func) & {"torch.device", "builtins.str"}
                or isinstance(expr.func, cst.Name) and expr.func.value == "str"):
            return self._device(expr.args[0].value, expr, p)  # torch.device("cuda" if ... else "cpu")
        if isinstance(expr, cst.Attribute) and expr.attr.value == "type" and key_of(self.module, expr) not in p.env:
            return self._device(expr.value, expr, p)  # device.type
        if isinstance(expr, cst.Call):
            names = self.names_of(expr.func)
            for name in names:
                if name in SCALERS:
                    return self._scaler_value(expr, SCALERS[name], p)
                if name in AUTOCASTS:
                    return self._autocast_value(expr, AUTOCASTS[name], p)
        return known(Atom(text_of(module, expr)))

    def _device(self, inner, expr, p) -> tuple:
        """A device named by strings on every path (``"cuda"``, ``"cuda:0"`` -> ``"cuda"``);
        anything else is unknown."""
        alts = self._eval(inner, p)
        if all(isinstance(v, str) for _, v in alts):
            return tuple((g, v.split(":")[0]) for g, v in alts)
        return known(Atom(text_of(self.module, expr)))

    def _table(self, expr, p) -> tuple:
        entries = []
        for element in expr.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return known(Atom(text_of(self.module, expr)))
            entries.append((ast.literal_eval(element.key.value), self._eval(element.value, p)))
        return known(Table(tuple(entries)))

    def _lookup(self, expr, p) -> tuple:
        """``table[key]``: the entry of a known key; under an unknown key, every entry,
        each under the condition that the key names it."""
        whole = known(Atom(text_of(self.module, expr)))
        tables = self._eval(expr.value, p)
        if not all(isinstance(v, Table) for _, v in tables):
            return whole
        key_node = expr.slice[0].slice.value
        out = []
        for gt, table in tables:
            for gk, key in self._eval(key_node, p):
                g = join(gt, gk)
                if g is None:
                    continue
                for name, alts in table.entries:
                    if isinstance(key, Atom):
                        # one atom per key, valued by the entry: two entries never hold at once
                        cond = join(g, frozenset({(f"{key.text} ==", name)}))
                    else:
                        cond = g if key == name else None
                    if cond is None:
                        continue
                    out += [(c, v) for c, v in ((join(cond, ga), v) for ga, v in alts) if c is not None]
        return tuple(out) or whole

    def _compare(self, expr, p) -> tuple:
        target = expr.comparisons[0]
        op = target.operator
        kinds = {cst.Equal: "==", cst.NotEqual: "!=", cst.Is: "is", cst.IsNot: "is not"}
        kind = next((k for t, k in kinds.items() if isinstance(op, t)), None)
        whole = known(Atom(text_of(self.module, expr)))
        if kind is None:
            return whole
        left, right = self._eval(expr.left, p), self._eval(target.comparator, p)
        out = []
        for gl, vl in left:
            for gr, vr in right:
                g = join(gl, gr)
                if g is None:
                    continue
                if isinstance(vl, Atom) or isinstance(vr, Atom):
                    out.append((g, Atom(text_of(self.module, expr))))
                    continue
                if kind in ("is", "is not") and (vl is None or vr is None):
                    same = vl is None and vr is None  # ``scaler is not None`` on a made scaler
                else:
                    same = vl == vr
                out.append((g, same if kind in ("==", "is") else not same))
        return tuple(out) or whole

    def _scaler_value(self, call, position, p) -> tuple:
        enabled = arg_of(call, "enabled", position)
        alts = truth(self._eval(enabled, p)) if enabled is not None else [(TRUE_GUARD, True)]
        return tuple((g, Scaler(call, b)) for g, b in alts)

    def _autocast_value(self, call, spec, p) -> tuple:
        device, dtype_at, enabled_at = spec
        devices = known(device) if device else None
        if devices is None:
            dev = arg_of(call, "device_type", 0)
            devices = self._eval(dev, p) if dev is not None else known(Atom("?"))
        dtype = arg_of(call, "dtype", dtype_at)
        dtypes = self._eval(dtype, p) if dtype is not None else known(None)
        enabled = arg_of(call, "enabled", enabled_at)
        enableds = truth(self._eval(enabled, p)) if enabled is not None else [(TRUE_GUARD, True)]
        out = []
        for gd, dev in devices:
            for gt, dt in dtypes:
                for ge, on in enableds:
                    g = join(gd, gt)
                    g = join(g, ge) if g is not None else None
                    if g is None:
                        continue
                    if isinstance(dt, Dtype):
                        name = dt.name
                    elif dt is None and isinstance(dev, str) and all(isinstance(d, str) for _, d in devices):
                        # the device's default dtype, only where the device is known on every
                        # path: ``autocast(d if d != "mps" else "cpu")`` may not cover the
                        # tensors' device at all
                        name = DEFAULT_AUTOCAST_DTYPE.get(dev)
                    else:
                        name = None
                    out.append((g, Autocast(call, name, on)))
        return tuple(out)


def _signature(p: Path):
    """Everything a path knows except its guard, by identity (values are immutable and
    shared between the paths that did not reassign them): paths with equal signatures
    differ only in how they got there."""
    return (p.ended, p.backward, p.iter_backward, id(p.pending[1]) if p.pending else None,
            tuple((k, id(v)) for k, v in p.stepped.items()),
            tuple((k, id(v)) for k, v in p.scaler_opts.items()),
            tuple((k, id(v)) for k, v in p.plain_steps.items()),
            tuple((k, id(n)) for k, n, _ in p.marks), tuple(id(r) for r in p.regions),
            id(p.ret_prov), tuple(id(c[0]) for c in p.callers), p.depths,
            tuple((k, id(v)) for k, v in p.env.items()),
            tuple((k, id(v)) for k, v in p.prov.items()))


def _merge(paths: list) -> list:
    """Paths that know the same and whose guards differ in one literal's truth become one
    (``if (i + 1) % accum == 0: log()`` does not double the paths)."""
    groups: dict = {}
    for p in paths:
        groups.setdefault(_signature(p), []).append(p)
    out = []
    for group in groups.values():
        changed = True
        while changed and len(group) > 1:
            changed = False
            for i, a in enumerate(group):
                for b in group[i + 1:]:
                    diff = a.guard ^ b.guard
                    if len(diff) == 2 and len({atom for atom, _ in diff}) == 1 and {v for _, v in diff} == {True, False}:
                        merged = a.copy()
                        merged.guard = a.guard & b.guard
                        group = [q for q in group if q is not a and q is not b] + [merged]
                        changed = True
                        break
                    if a.guard == b.guard:
                        group = [q for q in group if q is not b]
                        changed = True
                        break
                if changed:
                    break
        out += group
    return out


def _merged_env(paths, keep) -> dict:
    """Every path's bindings of the kept names as one set of alternatives, each guarded by
    the path it comes from."""
    merged: dict = {}
    for p in paths:
        for key, alts in p.env.items():
            if not keep(key):
                continue
            for g, v in alts:
                guard = join(p.guard, g)
                if guard is not None:
                    merged.setdefault(key, []).append((guard, v))
    return {k: tuple(v) for k, v in merged.items()}


def _calls_local(expr, analysis) -> bool:
    return any(analysis._local_callee(c) is not None for c in calls_in_order(expr))


class _NoAnalysis:
    """What a script too deeply nested to analyse yields: no hit."""

    hits: dict = {}


def analyse(script) -> StepAnalysis:
    """The script's step analysis, computed once and kept on the script for every rule."""
    return script.once(_step_analysis)


def _step_analysis(script):
    MEMO.clear()
    try:
        return StepAnalysis(script)
    except RecursionError:  # nested deeper than the visitors go: silence, no traceback
        return _NoAnalysis()
    finally:
        MEMO.clear()


def training_hits(script, rule: str):
    """``rule``'s hits in ``script`` as ``TrainingHit``s (the registry's currency)."""
    from .registry import TrainingHit

    if not mentions_amp(script.text):
        return
    analysis = analyse(script)
    for hit in analysis.hits.values():
        if hit.rule != rule:
            continue
        line, column = script.line_column(hit.node)
        fix = {"autofix": False, **(hit.fix or {})}
        yield TrainingHit(line=line, column=column, values=hit.values, condition=analysis.condition(hit),
                          scope=hit.scope, subject=hit.values.get("clip") or hit.values.get("backward")
                          or hit.values.get("scaler") or hit.values.get("call"), fix=fix)
