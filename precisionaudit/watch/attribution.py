"""Op-level attribution for a replay: which op first made a non-finite value, in which module,
forward or backward, and whether the same op in float32 would have stayed finite.

Three observers run together while the replay's forward and backward run:

* ``ModuleStack``: forward hooks on every module keep the stack of modules being run (names
  from the unwrapped model) and each one's inputs (to rerun a region in float32);
* ``Calls`` (a ``TorchFunctionMode``): the torch call an aten op belongs to (``linear``,
  ``exp``, ``log``: the names a plan's ``ops`` use); after each call it tags the autograd
  nodes the call created with that name and module, so that a backward op is attributed to
  the forward call it differentiates (``LogBackward0``'s ``div`` to ``log``);
* ``Ops`` (a ``TorchDispatchMode``): every aten op after autocast, with its real dtypes. For
  each it records the first one whose output is non-finite while its inputs are finite, and,
  in the forward, a ``Produced`` record per output: which call and module made it, and
  whether the low dtype flushed it to 0 or made it inf where float32 (from the same inputs)
  would not. The records link to their inputs' records, so a failure can be traced back to
  the op where the low dtype first lost the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..core.numerics import dtype_name
from ..runtime.pytorch.autocast_state import autocast_disabled
from ..runtime.pytorch.dtypes import LOW_PRECISION as LOW
from ..runtime.pytorch.ops import canonical_fn_name

#: calls that move or view values without computing new ones: left out of a region's ops
MOVES = frozenset("""
view view_as reshape reshape_as transpose permute t contiguous expand expand_as squeeze unsqueeze
flatten unflatten split chunk narrow select getitem setitem clone detach to float half bfloat16
double type type_as cat stack movedim swapaxes repeat tile flip roll unbind
""".split())


def floating(tree) -> list:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def all_finite(tensors) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.numel())


#: namespaces of the communication ops (c10d's process-group ops, the functional collectives)
COMMUNICATION = frozenset({"c10d", "_c10d_functional", "c10d_functional", "_dtensor"})


def op_kind(func) -> str | None:
    """What an aten op does that is not arithmetic: "communication" (a collective: run on one
    rank alone it hangs or mismatches the others), "allocation" (``empty`` and its kin: the
    memory's old bits), "view" (the input's values, re-viewed); None for the others."""
    if getattr(func, "namespace", None) in COMMUNICATION:
        return "communication"
    if _uninitialized(func):
        return "allocation"
    if getattr(func, "is_view", False):
        return "view"
    return None


def in_float32(func, args, kwargs):
    """``func`` run again with its fp16/bf16 inputs (and an fp16/bf16 ``dtype=``) made
    float32, without autocast and without autograd; None for an op that draws random
    numbers (it would move the generator), a collective (it would run on this rank alone),
    an allocation (its bits are the memory's) or one that fails so."""
    if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()) or op_kind(func) in ("communication",
                                                                                            "allocation"):
        return None
    mutable = getattr(getattr(func, "_schema", None), "is_mutable", False)

    def up(x):
        if isinstance(x, torch.Tensor):
            return x.float() if x.dtype in LOW else (x.clone() if mutable else x)
        return torch.float32 if isinstance(x, torch.dtype) and x in LOW else x

    args, kwargs = pytree.tree_map(up, (args, kwargs))
    try:
        with torch.no_grad(), autocast_disabled():
            return func(*args, **kwargs)
    except Exception:  # noqa: BLE001 - an op that does not take float32 inputs: no answer
        return None


def _key(t: torch.Tensor):
    """What identifies a tensor's values across the autograd boundary (a saved tensor comes
    back to a backward op as another Python object over the same storage)."""
    try:
        return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except (RuntimeError, NotImplementedError):
        return None


@dataclass(eq=False)
class Produced:
    """A forward value: the call and module that made it, and what the low dtype did to it."""

    fn: str | None
    module: str
    flushed: bool = False  # 0 in the low dtype where float32 from the same inputs is not
    overflowed: bool = False  # inf/NaN in the low dtype where float32 is finite
    inputs: list = field(default_factory=list)  # the Produced records of its inputs
    index: int = 0  # its op's place in the replay
    call: int = -1  # its torch call's place in ``Calls.log``
    dtype: torch.dtype | None = None  # its (first) output's dtype
    #: for a non-finite value: (func, args, kwargs, inputs, outputs, module stack) to describe
    #: its op, and the non-finite inputs no op of the replay made (a parameter, the batch)
    failed: tuple | None = None
    bad_leaves: list = field(default_factory=list)

    @property
    def lost(self) -> str | None:
        if self.overflowed:
            return "overflowed"
        return "flushed to 0" if self.flushed else None


class ModuleStack:
    """The modules being run (innermost last) with their inputs, from per-module hooks; each
    entry of ``stack`` is (module, name, args, kwargs, the call's number: one per module call)."""

    def __init__(self, names: dict):
        self.names, self.stack, self.handles = names, [], []
        self.entered = 0

    def __enter__(self):
        for module, name in self.names.items():
            self.handles.append(module.register_forward_pre_hook(self._enter, with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._leave, always_call=True))
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _enter(self, module, args, kwargs):
        self.entered += 1
        self.stack.append((module, self.names[module], args, kwargs, self.entered))

    def _leave(self, module, args, output):
        if self.stack and self.stack[-1][0] is module:
            self.stack.pop()

    @property
    def current(self) -> str:
        return self.stack[-1][1] if self.stack else ""


class Calls(TorchFunctionMode):
    """The torch call being run, and autograd nodes tagged with the call that made them.
    ``log``: every call of the forward, in order, as (name, the (module name, module call
    number) pairs it ran inside): what numbers a call within a module (``linear#2``)."""

    def __init__(self, modules: ModuleStack, produced: dict):
        super().__init__()
        self.modules, self.produced, self.current = modules, produced, None
        self.log: list = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = canonical_fn_name(func)
        self.current = name
        self.log.append((name, tuple((entry[1], entry[4]) for entry in self.modules.stack)))
        try:
            out = func(*args, **kwargs)
        finally:
            self.current = None
        if torch.is_grad_enabled():
            inputs = [self.produced.get(_key(t)) for t in floating((args, kwargs))]
            self._tag(out, {"fn": name, "module": self.modules.current, "inputs": [r for r in inputs if r],
                            "call": len(self.log) - 1})
        return out

    @staticmethod
    def _tag(out, tag):
        todo = [t.grad_fn for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or "precisionaudit" in node.metadata or type(node).__name__ == "AccumulateGrad":
                continue
            node.metadata["precisionaudit"] = tag
            todo += [n for n, _ in node.next_functions if n is not None]


class Ops(TorchDispatchMode):
    """Every aten op of the replay: the first non-finite one (from finite inputs), and the
    forward's records, from which ``origin_of`` traces a non-finite output to its source."""

    def __init__(self, calls: Calls, modules: ModuleStack, produced: dict, leaves: dict):
        super().__init__()
        self.calls, self.modules, self.produced = calls, modules, produced
        self.leaves = leaves  # _key -> the name of a parameter (or "the batch")
        self.phase = "forward"  # then "idle" (nothing recorded), "backward"
        self.first = None  # the first op with a non-finite output from finite inputs
        self.count = 0
        self.records: list = []  # the forward's records, in order (their consumers are found from it)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.phase == "idle":  # the replay's own checks between the forward and the backward
            return out
        self.count += 1
        outs, ins = floating(out), floating((args, kwargs))
        nonfinite = not _uninitialized(func) and not all_finite(outs)
        if self.phase == "forward":
            self._record(func, args, kwargs, ins, outs, nonfinite)
        elif nonfinite and self.first is None and ins and all_finite(ins):
            self.first = self.describe((func, args, kwargs, ins, outs, []))
        return out

    def _record(self, func, args, kwargs, ins, outs, nonfinite):
        """A Produced record per output; the float32 rerun only where the low dtype may have
        lost something (a zero or a non-finite value in a low-precision output) and the op
        computes: a view carries its input's record, a collective or an allocation is never
        rerun nor a value's origin."""
        if not outs:
            return
        kind = op_kind(func)
        inputs = [r for r in (self.produced.get(_key(t)) for t in ins) if r is not None]
        if kind == "view" and len(inputs) == 1:
            for t in outs:
                key = _key(t)
                if key is not None:
                    self.produced[key] = inputs[0]
            return
        record = Produced(self.calls.current, self.modules.current, inputs=inputs, index=self.count,
                          call=len(self.calls.log) - 1, dtype=outs[0].dtype)
        self.records.append(record)
        low = [t for t in outs if t.dtype in LOW]
        if kind is None and low and (nonfinite or any(bool((t == 0).any()) for t in low)):
            again = floating(in_float32(func, args, kwargs))
            if len(again) == len(outs):
                for t, ref in zip(outs, again):
                    if t.dtype not in LOW or ref.shape != t.shape:
                        continue
                    record.flushed |= bool(((t == 0) & (ref != 0) & torch.isfinite(ref)).any())
                    record.overflowed |= bool((~torch.isfinite(t) & torch.isfinite(ref)).any())
        if nonfinite:
            record.failed = (func, args, kwargs, ins, outs, list(self.modules.stack))
            record.bad_leaves = [self.leaves.get(_key(t), "the batch") for t in ins
                                 if self.produced.get(_key(t)) is None and not all_finite([t])]
            if self.first is None and all_finite(ins):
                self.first = record
        for t in outs:
            key = _key(t)
            if key is not None:
                self.produced[key] = record

    def origin_of(self, outputs) -> dict | None:
        """The source of the non-finite values among ``outputs``: following the non-finite
        values back through the records, the earliest op that made one from finite inputs,
        or that read one no op made (a parameter, the batch). A -inf mask that a softmax or a
        where absorbed is on no such path."""
        frontier = [self.produced.get(_key(t)) for t in outputs if not all_finite([t])]
        frontier, seen, sources = [r for r in frontier if r is not None and r.failed], set(), []
        while frontier:
            record = frontier.pop()
            if id(record) in seen:
                continue
            seen.add(id(record))
            upstream = [r for r in record.inputs if r.failed]
            if record.bad_leaves or not upstream:
                sources.append(record)
            frontier += upstream
        if not sources:
            return None
        source = min(sources, key=lambda r: r.index)
        described = self.describe(source.failed, source)
        if source.bad_leaves:
            described.update(phase="input", input=source.bad_leaves[0])
        return described

    def describe(self, failed: tuple, record: Produced | None = None) -> dict:
        func, args, kwargs, ins, outs, stack = failed
        node = torch._C._current_autograd_node() if self.phase == "backward" else None
        tag = node.metadata.get("precisionaudit", {}) if node is not None else {}
        again = in_float32(func, args, kwargs)
        fp32_finite = None if again is None else all_finite(floating(again))
        if record is not None:
            fn, module, node_name, inputs, call = record.fn, record.module, None, record.inputs, record.call
        else:
            fn, module, node_name = tag.get("fn"), tag.get("module", ""), node.name() if node else None
            inputs, call = tag.get("inputs", []), tag.get("call")
        return {"phase": self.phase if record is None else "forward", "module": module,
                "op": fn or _op_name(func), "aten": str(func), "node": node_name,
                "dtype": dtype_name(outs[0].dtype), "input_dtypes": [dtype_name(t.dtype) for t in ins],
                "fp32_finite": fp32_finite, "operands": first_operands(args, outs),
                "index": record.index if record is not None else self.count, "_inputs": inputs, "_stack": stack,
                "_call": call}


def first_operands(args, outs) -> list | None:
    """The operands (tensor elements and scalars, in argument order) of the op's first
    non-finite output element, as numbers: ``[0.0, 0.0]`` for a 0/0, ``[0.0]`` for a log(0);
    None where an operand does not broadcast to the output."""
    out = next((t for t in outs if not all_finite([t])), None)
    if out is None:
        return None
    where = tuple(int(i) for i in (~torch.isfinite(out)).nonzero()[0]) if out.dim() else ()
    values = []
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_floating_point():
            try:
                values.append(float(arg.detach().broadcast_to(out.shape)[where]))
            except (RuntimeError, IndexError):
                return None
        elif isinstance(arg, (int, float)) and not isinstance(arg, bool):
            values.append(float(arg))
    return values


def _uninitialized(func) -> bool:
    """``empty`` and its kin: their outputs hold whatever the memory held (FSDP's buffers,
    out= arguments), a NaN among it is no op's result."""
    return "empty" in getattr(func, "__name__", "") or "empty" in str(func)


def _op_name(func) -> str:
    """'div' for aten.div.Tensor: the op's name where no torch call names it."""
    return str(func).split(".")[1] if str(func).startswith("aten.") else str(func)
