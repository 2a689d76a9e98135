"""The calls of a statement on the walk's paths, in evaluation order: an AMP call goes to
the protocol (``protocol.on_call``), a call of a function or method of the same file is
walked through its body (inlined: its arguments bound to its parameters, ``self.``
shared), so that a scaler made in one place and used in another keeps what is known
about it. Recursion and calls deeper than ``MAX_INLINE_DEPTH`` are not followed.
"""
from __future__ import annotations

import ast

from ..syntax import bind_args, calls_in_order, params_of
from . import protocol
from .forward import evaluate
from .paths import Frame

#: more paths than this through one entry function: the function is left alone
MAX_PATHS = 256
#: calls followed into their callee, at most this deep
MAX_INLINE_DEPTH = 4
#: statements walked on each path, summed over one entry function (the callees it follows
#: included): past this the function is left alone too. On diffusers' examples, accelerate,
#: DeepSpeed, Lightning, timm and transformers every walk that finished took at most 6,201
#: and every walk that found something at most 57; the walks past 16,384 all ran out of
#: paths anyway, after up to 111,689 (five seconds of a pre-commit hook for nothing).
MAX_WORK = 16_384


class TooComplex(Exception):
    """The walk gave up (too many paths, or too much work): the function gives no finding."""


class Calls:
    """Calls on the paths of ``walker`` (a ``walk.Walker``)."""

    def __init__(self, walker):
        self.walker = walker
        self._in: dict = {}

    def calls_in(self, node) -> list:
        """``syntax.calls_in_order(node)``, worked out once per node (the walk meets a
        statement on many paths)."""
        found = self._in.get(id(node))
        if found is None:
            found = self._in[id(node)] = calls_in_order(node)
        return found

    def events(self, expr, paths) -> list:
        """The paths after the calls in ``expr`` ran, in evaluation order. A call into a
        function of this file is walked once for all the paths that reach it."""
        w = self.walker
        for call in self.calls_in(expr):
            live = [p for p in paths if p.ended is None]
            done = [p for p in paths if p.ended is not None]
            target = self.local_callee(call)
            if target is not None:
                paths = done + self._inline(target, call, live)
            else:
                paths = done + [q for p in live for q in protocol.on_call(w, call, p)]
            if len(paths) > MAX_PATHS:
                raise TooComplex
        return paths

    def local_callee(self, call):
        """(function, its class or None) when ``call`` calls a function of this file (one
        defined in a function being walked included: a ``clip()`` helper inside the step) or
        a method of the class being walked through ``self.``; None otherwise."""
        w = self.walker
        func = call.func
        frame = w.frames[-1]
        if isinstance(func, ast.Name):
            for outer in reversed(w.frames):
                nested = w.index.nested.get(id(outer.fn), {}).get(func.id) if outer.fn is not None else None
                if nested is not None:
                    return nested, None
        if isinstance(func, ast.Name) and func.id in w.index.functions:
            return w.index.functions[func.id], None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and frame.cls is not None and func.attr in w.index.methods.get(frame.cls, {}):
            return w.index.methods[frame.cls][func.attr], frame.cls
        return None

    def _inline(self, target, call, paths) -> list:
        w = self.walker
        fn, cls = target
        if id(fn) not in w.amp_functions and not (cls is not None and id(fn) in w.facts.self_setters):
            return paths  # a method that sets self.<attr> is followed: it may set the dtype or the scaler
        if len(w.frames) > MAX_INLINE_DEPTH or any(f.fn is fn for f in w.frames):
            return paths
        entering = []
        for p in paths:
            q = p.copy()
            q.callers = p.callers + ((p.env, p.prov),)
            env = {**w.module_env, **{k: v for k, v in p.env.items() if k.startswith("self.")}}
            prov = {k: v for k, v in p.prov.items() if k.startswith("self.")}
            for param in params_of(fn, cls is not None):
                env.pop(param, None)
            for param, arg in bind_args(fn, call, cls is not None):
                env[param] = evaluate(w.script, arg, p)
                prov[param] = w.prov(arg, p)
            q.env, q.prov = env, prov
            q.ret_prov = frozenset()
            entering.append(q)
        scope = f"{cls}.{fn.name}" if cls else fn.name
        w.frames.append(Frame(scope, cls if cls else w.frames[-1].cls, fn=fn, call=call))
        saved_loops, w.loop_ifs = w.loop_ifs, []
        try:
            walked = self.walker.block(fn.body, entering)
        finally:
            w.frames.pop()
            w.loop_ifs = saved_loops
        out = []
        for r in walked:
            if r.ended == "raise":
                continue
            r.ended = None
            (caller_env, caller_prov), r.callers = r.callers[-1], r.callers[:-1]
            r.env = {**caller_env, **{k: v for k, v in r.env.items() if k.startswith("self.")}}
            r.prov = {**caller_prov, **{k: v for k, v in r.prov.items() if k.startswith("self.")}}
            out.append(r)
        return out


