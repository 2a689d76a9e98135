"""What the step analysis reads from a script's syntax tree, path-independent: the AMP
names it recognises (by LibCST qualified name), one indexing pass over the file
(``StepIndex``: its functions, which reach an AMP call, the names used as scalers, argparse
flags, the statements worth splitting paths on), the textual prefilter, and small
accessors of calls and targets, memoized per node because the walk meets the same
statement on many paths.
"""
from __future__ import annotations

import ast

import libcst as cst

DTYPES = {"torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16",
          "torch.float32": "float32", "torch.float": "float32"}
#: GradScaler classes -> the position of their ``enabled`` argument
SCALERS = {"torch.amp.GradScaler": 5, "torch.amp.grad_scaler.GradScaler": 5,
           "torch.GradScaler": 5,
           "torch.cuda.amp.GradScaler": 4, "torch.cuda.amp.grad_scaler.GradScaler": 4,
           "torch.cpu.amp.GradScaler": 4, "torch.cpu.amp.grad_scaler.GradScaler": 4,
           "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
           "torch.distributed.fsdp.ShardedGradScaler": 5}
#: autocast classes -> (fixed device or None, position of dtype, position of enabled)
AUTOCASTS = {"torch.autocast": (None, 1, 2), "torch.amp.autocast": (None, 1, 2),
             "torch.amp.autocast_mode.autocast": (None, 1, 2),
             "torch.cuda.amp.autocast": ("cuda", 1, 0), "torch.cuda.amp.autocast_mode.autocast": ("cuda", 1, 0),
             "torch.cpu.amp.autocast": ("cpu", 1, 0), "torch.cpu.amp.autocast_mode.autocast": ("cpu", 1, 0)}
#: autocast's default dtype per device (torch.get_autocast_dtype)
DEFAULT_AUTOCAST_DTYPE = {"cuda": "float16", "xpu": "float16", "cpu": "bfloat16"}
CLIPS = {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_",
         "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_value_",
         "torch.nn.utils.clip_grad_norm"}
#: method and function names that make a statement worth splitting paths on
RELEVANT_CALLS = {"backward", "scale", "step", "update", "unscale_", "zero_grad", "clip_grad_norm_",
                  "clip_grad_value_", "clip_grad_norm", "GradScaler", "ShardedGradScaler", "autocast"}
RELEVANT_WORDS = ("amp", "fp16", "bf16", "float16", "bfloat16", "half", "dtype", "scaler", "precision")
#: the textual prefilter (``training_check(mentions=...)``): the walk's rules need a scaler
#: or an autocast region (a scaler received under another name and never unscaled is
#: missed) and a backward, a clip or a step; PA409 needs a deprecated spelling. Most files
#: say neither and are not parsed by LibCST at all.
AMP_WORDS = ("autocast", "GradScaler", "scaler", "unscale_")
STEP_WORDS = ("backward", "clip_grad", ".step(")
DEPRECATED_WORDS = ("torch.cuda.amp", "torch.cpu.amp", "custom_fwd", "custom_bwd", "import amp")


def mentions_amp(text: str) -> bool:
    """Whether the step rules may find anything in a file with this text."""
    return any(w in text for w in AMP_WORDS) and any(w in text for w in STEP_WORDS)


def mentions_deprecated_amp(text: str) -> bool:
    """Whether PA409 may find anything in a file with this text."""
    return any(w in text for w in DEPRECATED_WORDS)


def text_of(module: cst.Module, node) -> str:
    """``node``'s source text, without parentheses around the whole (``(use_amp)`` and
    ``use_amp`` are one atom)."""
    return memo("text", node, lambda n: _unparenthesized(module.code_for_node(n).strip()))


def _unparenthesized(text: str) -> str:
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text  # "(a) + (b)": the first parenthesis closes early
        text = text[1:-1].strip()
    return text


def key_of(module, node) -> str | None:
    """``loss``, ``self.scaler``: a name the walk tracks values under (None: not one)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = key_of(module, node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def arg_of(call: cst.Call, keyword: str, position: int | None):
    for i, arg in enumerate(a for a in call.args if a.keyword is None and not a.star):
        if i == position:
            return arg.value
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


def positional(call: cst.Call) -> list:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def method_of(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


class StepIndex(cst.CSTVisitor):
    """One pass over the file: its functions and methods, which of them are called, the
    names used as scalers and optimizers, argparse flags, and the compound statements
    that contain something AMP-related (the only ones worth splitting paths on)."""

    def __init__(self, module, functions, methods):
        self.module = module
        self.functions = functions
        self.methods = methods
        self.local_names = set(functions) | {m for ms in methods.values() for m in ms}
        self.relevant: set = set()
        self.stack: list = []
        self.called: set = set()
        self.scaler_keys: set = set()
        self.step_args: list = []
        self.flags: dict = {}
        self.fn_stack: list = []
        self.has_events: set = set()     # ids of functions with an AMP call in their body
        self.callees: dict = {}          # id of function -> local names it calls
        self.defs: dict = {}             # id -> FunctionDef
        self.self_setters: set = set()   # ids of methods that assign ``self.<attr>``

    def visit_AssignTarget(self, node):
        target = node.target
        if self.fn_stack and isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) \
                and target.value.value == "self":
            self.self_setters.add(id(self.fn_stack[-1]))

    def visit_FunctionDef(self, node):
        self.fn_stack.append(node)
        self.defs[id(node)] = node

    def leave_FunctionDef(self, node):
        self.fn_stack.pop()

    def amp_functions(self) -> set:
        """ids of the functions whose walk can meet an AMP event: those with one in their
        body and those calling them (the rest are neither walked nor followed)."""
        relevant = set(self.has_events)
        changed = True
        while changed:
            names = {self.defs[i].name.value for i in relevant}
            grown = {i for i, called in self.callees.items() if called & names} | relevant
            changed = grown != relevant
            relevant = grown
        return relevant

    def _mark(self):
        for node in reversed(self.stack):
            if id(node) in self.relevant:
                break
            self.relevant.add(id(node))

    def _push(self, node):
        self.stack.append(node)

    def _pop(self, node):
        self.stack.pop()

    visit_If = visit_For = visit_While = visit_With = visit_Try = _push
    leave_If = leave_For = leave_While = leave_With = leave_Try = _pop

    def visit_Call(self, node):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else None)
        if name in RELEVANT_CALLS or name in self.local_names:
            self._mark()
        if self.fn_stack:
            if name in RELEVANT_CALLS or name == "is_enabled":
                self.has_events.add(id(self.fn_stack[-1]))
            if name in self.local_names:
                self.callees.setdefault(id(self.fn_stack[-1]), set()).add(name)
        if isinstance(func, cst.Name) and func.value in self.functions:
            self.called.add(func.value)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and name in self.local_names:
            self.called.add(name)
        if isinstance(func, cst.Attribute):
            receiver = key_of(self.module, func.value)
            if name == "unscale_" and receiver:
                self.scaler_keys.add(receiver)
            if name == "backward" and isinstance(func.value, cst.Call) and method_of(func.value) == "scale":
                inner = key_of(self.module, func.value.func.value)
                if inner:
                    self.scaler_keys.add(inner)
            if name in ("scale", "step", "update") and receiver and receiver.lower().endswith("scaler"):
                self.scaler_keys.add(receiver)
            if name == "step" and receiver and len(node.args) == 1:
                arg = key_of(self.module, node.args[0].value)
                if arg:
                    self.step_args.append((receiver, arg))
            if name == "add_argument":
                self._flag(node)

    def _flag(self, node):
        flags = [ast.literal_eval(a.value) for a in positional(node) if isinstance(a, cst.SimpleString)]
        flags = [f for f in flags if isinstance(f, str)]
        long = [f for f in flags if f.startswith("--")]
        if not long:
            return
        dest = arg_of(node, "dest", None)
        name = ast.literal_eval(dest.value) if isinstance(dest, cst.SimpleString) else long[0][2:].replace("-", "_")
        self.flags[name] = long[0]

    def _word(self, text):
        low = text.lower()
        if any(w in low for w in RELEVANT_WORDS):
            self._mark()

    def visit_Name(self, node):
        self._word(node.value)

    def _control(self, node):
        """continue/break/return/raise change which statements a path runs."""
        self._mark()

    visit_Continue = visit_Break = visit_Return = visit_Raise = _control

    def visit_Attribute(self, node):
        self._word(node.attr.value)


def method_name_of(expr) -> str | None:
    return method_of(expr) if isinstance(expr, cst.Call) else None


def params_of(fn, method: bool) -> list:
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]
    return params[1:] if method and params else params


def bind_args(fn, call, method: bool):
    """(parameter, argument expression) pairs for a plain call of ``fn``."""
    if any(a.star for a in call.args):
        return []
    positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if method:
        positional = positional[1:]
    pairs = []
    for name, arg in zip(positional, [a for a in call.args if a.keyword is None]):
        pairs.append((name, arg.value))
    for arg in call.args:
        if arg.keyword is not None:
            pairs.append((arg.keyword.value, arg.value))
    return pairs


def targets_of(node) -> list:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [t for e in node.elements for t in targets_of(e.value)]
    if isinstance(node, cst.StarredElement):
        return targets_of(node.value)
    return [node]


class _Collector(cst.CSTVisitor):
    def __init__(self, kind, skip_defs=True):
        self.kind = kind
        self.found = []
        self.skip_defs = skip_defs

    def on_visit(self, node):
        if self.skip_defs and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        return super().on_visit(node)

    def on_leave(self, node):
        if isinstance(node, self.kind):
            self.found.append(node)
        super().on_leave(node)


MEMO: dict = {}


def memo(kind, node, compute):
    """Path-independent facts of a node, computed once per node (the walk meets the same
    statement on many paths, and LibCST visits are the cost of a scan). Keyed by id while
    the node lives: ``analyse`` clears the memo for each script."""
    key = (kind, id(node))
    found = MEMO.get(key)
    if found is None:
        found = MEMO[key] = (node, compute(node))
    return found[1]


def calls_in_order(node) -> list:
    """The calls in ``node`` in evaluation order (arguments and receivers first)."""
    def compute(node):
        collector = _Collector(cst.Call)
        node.visit(collector)
        return collector.found

    return memo("calls", node, compute)


def reads_of(expr) -> list:
    """The names and attribute chains ``expr`` reads."""
    return memo("reads", expr, _compute_reads)


def _compute_reads(expr) -> list:
    found = []

    class Reads(cst.CSTVisitor):
        def visit_Attribute(self, node):
            found.append(node)

        def visit_Name(self, node):
            found.append(node)

        def visit_Lambda(self, node):
            return False

    expr.visit(Reads())
    return found


def assigned_in(stmt) -> list:
    """What a statement assigns, anywhere inside it (targets of =, +=, for, with ... as)."""
    return memo("assigned", stmt, _compute_assigned)


def _compute_assigned(stmt) -> list:
    found = []

    class Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node):
            found.extend(targets_of(node.target))

        def visit_AugAssign(self, node):
            found.append(node.target)

        def visit_AnnAssign(self, node):
            found.append(node.target)

        def visit_For(self, node):
            found.extend(targets_of(node.target))

        def visit_AsName(self, node):
            found.extend(targets_of(node.name))

        def visit_FunctionDef(self, node):
            return False

        def visit_ClassDef(self, node):
            return False

    stmt.visit(Targets())
    return found
