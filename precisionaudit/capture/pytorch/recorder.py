"""Record every aten op a forward runs, after autocast, with who called it and from where.

A ``TorchDispatchMode`` sees the ops below autocast (so the casts autocast inserts and
the dtypes it chose are what we record); a ``TorchFunctionMode`` tells which user-level
call (``F.softmax``, ``x @ y``, ``nn.Linear``'s ``F.linear``) each aten op belongs to; and
global module hooks give the ``named_modules()`` path. The same recorder works on fake
tensors (no memory, no values) and on real ones (the eager fallback).
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from ...runtime.pytorch.ops import canonical_fn_name

#: frames in these directories are not the user's: torch, this package, the standard library
_SKIP_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                   for m in (torch, sys.modules[__name__.partition(".")[0]], os))


def skip_frames_in(package) -> None:
    """Take ``package``'s frames for library code, not the user's (Keras's backend ops: a
    finding then points at the user's layer ``call``, not at keras/src/backend/torch)."""
    global _SKIP_DIRS
    directory = os.path.dirname(os.path.abspath(package.__file__)) + os.sep
    if directory not in _SKIP_DIRS:
        _SKIP_DIRS = (*_SKIP_DIRS, directory)


#: clamp's bounds are positional and optional: its None (clamp(x, None, max)) is kept as a
#: placeholder so that a max alone is not read as a min
CLAMPS = {torch.ops.aten.clamp.default, torch.ops.aten.clamp_.default, torch.ops.aten.clamp.Tensor,
          torch.ops.aten.clamp_.Tensor}


@dataclass
class TensorRef:
    """What an op read: a tensor (with its producer) or a Python scalar."""

    dtype: torch.dtype | None
    shape: tuple | None
    producer: object = None  # op index (int), ("input", i) or ("param", name), or None
    value: float | int | bool | None = None  # for scalars and 0-d constants we know
    keyword: str | None = None  # the keyword it was passed as (baddbmm's alpha, beta)


@dataclass
class AtenOp:
    index: int
    target: str  # "aten._softmax.default"
    inputs: list[TensorRef]
    outputs: list[TensorRef]
    call: int  # index of the user-level call it belongs to
    banned: bool = False


@dataclass
class Call:
    """One user-level call (a torch function) and where it was made."""

    index: int
    fn: str  # "softmax", "matmul", "linear"
    module: str
    module_type: str
    file: str | None
    line: int | None
    autocast: bool = False  # autocast was on where the call was made (not in an enabled=False region)
    ops: list[int] = field(default_factory=list)
    column: int | None = None
    # the Python number ``t[i] = value`` wrote: below Python, torch has already made it a
    # tensor of t's dtype (2**30 is inf in fp16 before any aten op sees it)
    assigned: float | int | None = None


def _autocast_on() -> bool:
    """CPU autocast is what runs during a capture (it stands in for CUDA's when emulated)."""
    return torch.is_autocast_enabled("cpu")


#: code of this package's functions that call a model's forward: a walk up the stack that
#: reaches one has left the model without meeting its code (the model is a bare torch module)
_MODEL_CALLERS: set = set()


def calls_the_model(fn):
    """Mark ``fn`` as one that runs a model's forward (see ``user_frame``)."""
    _MODEL_CALLERS.add(fn.__code__)
    return fn


def user_frame() -> tuple[str | None, int | None, int | None]:
    """(file, line, column) of the innermost frame of the user's code on the stack; the
    column (1-based, as editors count) is where the call's expression starts. None when the
    call was made by torch itself on behalf of the caller (an ``nn.Linear`` as the model),
    never the frame of whatever called precisionaudit (click, pytest)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code not in _MODEL_CALLERS:
        path = frame.f_code.co_filename
        if not path.startswith(_SKIP_DIRS) and not path.startswith("<"):
            return path, frame.f_lineno, _column(frame.f_code, frame.f_lasti, frame.f_lineno)
        frame = frame.f_back
    return None, None, None


def _column(code, lasti: int, line: int) -> int | None:
    start_line, _, column, _ = _positions(code)[lasti // 2]
    return column + 1 if column is not None and start_line == line else None


@functools.lru_cache(maxsize=4096)
def _positions(code) -> list:
    return list(code.co_positions())




class _CallTracker(TorchFunctionMode):
    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        rec = self.recorder
        # read autocast's state here: below, inside an autocast kernel, its key is excluded
        rec.pending = (canonical_fn_name(func), *user_frame(), _autocast_on())
        rec.pending_assigned = _assigned_number(rec.pending[0], args)
        rec.current_call = None
        try:
            return func(*args, **(kwargs or {}))
        finally:
            rec.pending = rec.pending_assigned = None
            rec.current_call = None


def _assigned_number(fn: str, args) -> float | int | None:
    """The Python number of ``t[index] = number`` (Tensor.__setitem__(t, index, number))."""
    if fn == "setitem" and len(args) == 3 and isinstance(args[2], (int, float)) \
            and not isinstance(args[2], bool):
        return args[2]
    return None


class _AtenOpTap(TorchDispatchMode):
    """Hands the recorder each aten op below autocast, with its arguments and result."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace != "prim":  # prim.device & co. are queries, not computations
            self.recorder.record(func, args, kwargs, out)
        return out


class Recorder:
    """Context manager that fills ``self.ops`` and ``self.calls`` while a forward runs."""

    def __init__(self, model: torch.nn.Module, param_names: dict | None = None):
        self.ops: list[AtenOp] = []
        self.calls: list[Call] = []
        self.producer = WeakIdKeyDictionary()
        self.module_names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
        self.module_stack: list[tuple[str, str]] = [("", type(model).__name__)]
        self.pending = None
        self.pending_assigned = None
        self.current_call: Call | None = None
        self.banned_pending = False
        for name, t in (param_names or {}).items():
            self.producer[t] = ("param", name)

    def mark_inputs(self, inputs):
        for i, t in enumerate(pytree.tree_leaves(inputs)):
            if isinstance(t, torch.Tensor):
                self.producer[t] = ("input", i)

    def mark_banned(self, _name):
        self.banned_pending = True

    # module hooks -----------------------------------------------------------------
    def _pre_hook(self, module, _args):
        name = self.module_names.get(id(module))
        if name is None:
            name = self.module_stack[-1][0]
        self.module_stack.append((name, type(module).__name__))

    def _post_hook(self, module, _args, _out):
        if len(self.module_stack) > 1:
            self.module_stack.pop()

    # recording ----------------------------------------------------------------------
    def _ref(self, x) -> TensorRef:
        if isinstance(x, torch.Tensor):
            value = None
            if x.numel() == 1 and not x.requires_grad:
                constant = getattr(x, "constant", None)
                source = constant if constant is not None else x
                if not isinstance(source, torch._subclasses.FakeTensor) and source.device.type != "meta":
                    try:
                        value = source.item()
                    except Exception:  # noqa: BLE001 - a value we cannot read is simply unknown
                        value = None
            return TensorRef(x.dtype, tuple(x.shape), self.producer.get(x), value)
        return TensorRef(None, None, None, x)

    @staticmethod
    def _kept(a, func) -> bool:
        return isinstance(a, (torch.Tensor, int, float)) or (a is None and func in CLAMPS)

    def call_of(self, func) -> Call:
        """The user-level call the aten op ``func`` belongs to: the torch function being run,
        or a call of its own for an op made outside any (a new ``Call`` either way at its
        first op)."""
        call = self.current_call
        if call is None:
            fn, file, line, column, autocast = self.pending or (
                func.__name__.split(".")[0].lstrip("_"), *user_frame(), _autocast_on())
            module, module_type = self.module_stack[-1]
            call = Call(len(self.calls), fn, module, module_type, file, line, autocast, column=column,
                        assigned=self.pending_assigned if self.pending is not None else None)
            self.calls.append(call)
            if self.pending is not None:
                self.current_call = call
        return call

    def record(self, func, args, kwargs, out):
        call = self.call_of(func)
        inputs = [self._ref(a) for a in pytree.tree_leaves(args) if self._kept(a, func)]
        for keyword, value in kwargs.items():
            for a in pytree.tree_leaves(value):
                if self._kept(a, func):
                    inputs.append(self._ref(a))
                    inputs[-1].keyword = keyword
        outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
        op = AtenOp(len(self.ops), str(func), inputs, [self._ref(o) for o in outs], call.index,
                    banned=self.banned_pending)
        self.banned_pending = False
        self.ops.append(op)
        call.ops.append(op.index)
        for o in outs:
            self.producer[o] = op.index

    def __enter__(self):
        self._handles = [
            torch.nn.modules.module.register_module_forward_pre_hook(self._pre_hook),
            torch.nn.modules.module.register_module_forward_hook(self._post_hook, always_call=True),
        ]
        self._tap = _AtenOpTap(self)
        self._tracker = _CallTracker(self)
        self._tracker.__enter__()
        self._tap.__enter__()
        return self

    def __exit__(self, *exc):
        self._tap.__exit__(*exc)
        self._tracker.__exit__(*exc)
        for h in self._handles:
            h.remove()
        return False
