"""The syntax toolkit every training analysis reads a script with (CPython ``ast`` nodes):
the torch names it recognises, one table each (dtypes, GradScalers, autocasts, clips), and
the small accessors of calls and targets (the argument of a call, the key a value is
tracked under, the targets of an assignment).

Names in the tables are qualified names (``source.Script.names_of``): ``torch.amp.GradScaler``
for ``GS`` after ``from torch.amp import GradScaler as GS``.
"""
from __future__ import annotations

import ast

#: qualified torch names of the floating dtypes (and the tensor types ``Module.type()``
#: takes) -> the dtype's name
DTYPES = {
    "torch.float16": "float16", "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float32": "float32", "torch.float": "float32",
    "torch.float64": "float64", "torch.double": "float64",
    "torch.HalfTensor": "float16", "torch.cuda.HalfTensor": "float16",
    "torch.BFloat16Tensor": "bfloat16", "torch.cuda.BFloat16Tensor": "bfloat16",
    "torch.FloatTensor": "float32", "torch.cuda.FloatTensor": "float32",
}
#: how strings name dtypes (``from_pretrained(torch_dtype="float16")``)
DTYPE_STRINGS = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16",
                 "bf16": "bfloat16", "float32": "float32", "fp32": "float32", "float": "float32"}
#: the dtypes mixed precision computes or stores in
LOW_DTYPES = ("float16", "bfloat16")
#: GradScaler classes -> the position of their ``enabled`` argument. ``sharded``: FSDP's,
#: which allows fp16 gradients and syncs its inf checks across ranks
SCALERS = {"torch.amp.GradScaler": 5, "torch.amp.grad_scaler.GradScaler": 5, "torch.GradScaler": 5,
           "torch.cuda.amp.GradScaler": 4, "torch.cuda.amp.grad_scaler.GradScaler": 4,
           "torch.cpu.amp.GradScaler": 4, "torch.cpu.amp.grad_scaler.GradScaler": 4,
           "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
           "torch.distributed.fsdp.ShardedGradScaler": 5}
SHARDED_SCALERS = frozenset(name for name in SCALERS if name.endswith(".ShardedGradScaler"))
#: the scalers that refuse fp16 gradients and check only the local ones for inf/NaN
PLAIN_SCALERS = frozenset(SCALERS) - SHARDED_SCALERS
#: autocast classes -> (fixed device or None, position of dtype, position of enabled)
AUTOCASTS = {"torch.autocast": (None, 1, 2), "torch.amp.autocast": (None, 1, 2),
             "torch.amp.autocast_mode.autocast": (None, 1, 2),
             "torch.cuda.amp.autocast": ("cuda", 1, 0), "torch.cuda.amp.autocast_mode.autocast": ("cuda", 1, 0),
             "torch.cpu.amp.autocast": ("cpu", 1, 0), "torch.cpu.amp.autocast_mode.autocast": ("cpu", 1, 0)}
#: autocast's default dtype per device (torch.get_autocast_dtype)
DEFAULT_AUTOCAST_DTYPE = {"cuda": "float16", "xpu": "float16", "cpu": "bfloat16"}
CLIPS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_",
                   "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_value_",
                   "torch.nn.utils.clip_grad_norm"})

#: scope-making statements: their body is not part of the statement that holds them
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def argument(call: ast.Call, keyword: str | None, position: int | None = None):
    """The expression ``call`` passes as ``keyword`` or, when no ``*args`` hides the
    positions, at ``position``; None when it passes none."""
    if keyword is not None:
        for kw in call.keywords:
            if kw.arg == keyword:
                return kw.value
    if position is not None and not any(isinstance(a, ast.Starred) for a in call.args) \
            and position < len(call.args):
        return call.args[position]
    return None


def unpacks(call: ast.Call) -> bool:
    """Whether ``call`` passes ``*args`` or ``**kwargs`` (any argument may hide there)."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def unpacks_keywords(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def positional_strings(call: ast.Call) -> list[str]:
    """The string literals ``call`` passes by position (``add_argument("-f", "--fp16")``)."""
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def method_of(call) -> str | None:
    """``step`` for ``x.step(...)``; None for any other callee (or a non-call)."""
    return call.func.attr if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None


def last_name(func) -> str | None:
    """``AdamW`` for ``torch.optim.AdamW`` or ``AdamW``; None for other callees."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def key_of(node) -> str | None:
    """``loss``, ``self.scaler``: a name or attribute chain a value is tracked under."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = key_of(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def self_attribute(node) -> str | None:
    """``self.model`` for exactly ``self.<name>``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def targets_of(node) -> list:
    """The names and attributes an assignment target binds (``a, (b, *c)``: a, b, c)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for e in node.elts for t in targets_of(e)]
    if isinstance(node, ast.Starred):
        return targets_of(node.value)
    return [node]


def string(node) -> str | None:
    """The value of a string literal, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def literal(node):
    """The value of an int (not bool) or string literal, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)) and not isinstance(node.value, bool):
        return node.value
    return None


def params_of(fn, method: bool) -> list[str]:
    """The names a call can bind in ``fn`` (not ``*args``/``**kwargs``), less ``self``."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return params[1:] if method and params else params


def bind_args(fn, call: ast.Call, method: bool) -> list:
    """(parameter, argument expression) pairs for a plain call of ``fn``."""
    if unpacks(call):
        return []
    positional = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    if method:
        positional = positional[1:]
    return list(zip(positional, call.args)) + [(k.arg, k.value) for k in call.keywords]


def children(node) -> list:
    """``node``'s child nodes in source order (``ast`` lists a def's decorators after its
    body and a conditional expression's test before its value)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*node.decorator_list, node.args, *([node.returns] if node.returns else []), *node.body]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords, *node.body]
    if isinstance(node, ast.IfExp):
        return [node.body, node.test, node.orelse]
    if isinstance(node, ast.Dict):
        return [n for pair in zip(node.keys, node.values) for n in pair if n is not None]
    if isinstance(node, ast.Call) and node.keywords and node.args:
        return [node.func, *sorted((*node.args, *node.keywords), key=_start)]
    return list(ast.iter_child_nodes(node))


def _start(node):
    return node.lineno, node.col_offset


def calls_in_order(node) -> list:
    """The calls in ``node`` (a node or a list of statements) in evaluation order (arguments
    and receivers first), not those in nested functions, classes or lambdas."""
    found = []
    stack = [(n, False) for n in reversed(node)] if isinstance(node, list) else [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if expanded:
            if isinstance(current, ast.Call):
                found.append(current)
            continue
        if isinstance(current, (*DEFS, ast.Lambda)):
            continue
        stack.append((current, True))
        stack.extend((child, False) for child in reversed(children(current)))
    return found


def own_returns(fn) -> list:
    """The return statements of the function ``fn`` itself, not of the functions and classes
    it defines, in ``ast.walk``'s order."""
    found, queue = [], list(fn.body)
    for node in queue:  # breadth first, as ast.walk; the queue grows as it is read
        if isinstance(node, ast.Return):
            found.append(node)
        if not isinstance(node, (*DEFS, ast.Lambda)):
            queue.extend(ast.iter_child_nodes(node))
    return found


def reads_of(expr) -> list[str]:
    """The keys (``loss``, ``self.x``) ``expr`` reads, outside lambdas: every name and
    attribute chain in it, each attribute's own name and each keyword's name included (a
    value computed from ``out.loss`` may carry what ``loss`` carried)."""
    found, stack = [], [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name):
            found.append(node.id)
        elif isinstance(node, ast.Attribute):
            key = key_of(node)
            if key:
                found.append(key)
            found.append(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            found.append(node.arg)
        stack.extend(ast.iter_child_nodes(node))
    return found


def assigned_in(stmt) -> list:
    """The keys a statement binds anywhere inside it (targets of ``=``, ``+=``, ``for``,
    ``with ... as``, ``except ... as``, ``import ... as``), not inside defs."""
    found, stack = [], [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, DEFS):
            continue
        if isinstance(node, ast.Assign):
            found += [key_of(t) for target in node.targets for t in targets_of(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            found.append(key_of(node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            found += [key_of(t) for t in targets_of(node.target)]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            found += [key_of(t) for t in targets_of(node.optional_vars)]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append(node.name)
        elif isinstance(node, ast.alias) and node.asname:
            found.append(node.asname)
        stack.extend(ast.iter_child_nodes(node))
    return [k for k in found if k]
