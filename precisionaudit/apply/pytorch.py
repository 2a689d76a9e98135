"""``apply_plan``: make the planned regions of a live model run in fp32, and undo it.

Training code calls this, so it must not retrace or rewrite the model and must not touch
a parameter: it only registers forward pre/post hooks on the modules the plan names.
While such a module runs, a ``TorchFunctionMode`` sees every torch call made inside it
(its submodules included) and

* runs the planned ops (an entry's ``ops``, or every op for a whole-module entry; ``op#n``
  is the n-th call of ``op`` in each call of the module) with
  autocast disabled, their fp16/bf16 inputs upcast to fp32 and an fp16/bf16 ``dtype=``
  argument made fp32 (``arange(n, dtype=x.dtype)``; parameters are upcast on
  the fly, as autocast itself does; a whole-module region also ignores casts down to
  fp16/bf16 written inside it);
* lets their fp32 results flow on inside the region. Casting each result straight back
  would undo the fix: ``exp`` computed in fp32 and rounded to fp16 is still inf. Ops that
  are not planned but receive such a result keep fp32 (type promotion), except GEMMs and
  convolutions, which get it back in the low dtype so that they stay on Tensor Cores (and,
  without autocast, any fp32 activation beside a low-precision operand: ``w.to(x.dtype)``
  of a region-made ``x`` is fp32 only because of the plan). A result autocast itself
  returns in fp32 (exp, softmax, sum) is no region-made value: it stays fp32;
* casts the region's outputs back to the surrounding dtype when the module returns
  (the dtype the results' low-precision inputs had; for a whole module, its inputs'), so
  the rest of the model sees the dtypes it sees without the plan. A whole module that runs
  inside another region (a plan's ``block.ff.wo`` within its ``block`` entry) hands its
  fp32 results on to that region instead, which casts back when it returns.

The same mechanism serves ``torch.autocast`` (CUDA or CPU) and pure fp16/bf16 models.
Removing the handle removes the hooks: the original forward is back exactly.
Limitations: modules called through ``module.forward(...)`` instead of ``module(...)``
skip hooks; in-place writes through a view of an upcast copy made by an earlier op are
not written back (in-place ops themselves are), nor are in-place writes to a whole-module
region's inputs (the region works on fp32 copies of them).
"""
from __future__ import annotations

import threading
import warnings
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils.weak import WeakIdKeyDictionary

from ..core.autocast_policy import FP32_CALLS
from ..core.globs import matches
from ..plan.file import Override, OverridePlan, load_plan, split_op
from ..runtime.pytorch.autocast_state import autocast_devices, autocast_disabled
from ..runtime.pytorch.dtypes import LOW_PRECISION as LOW
from ..runtime.pytorch.ops import CAST_FNS, GEMM_OPS, QUERIES, canonical_fn_name, canonical_name


class PlanWarning(UserWarning):
    """A plan entry that matched no module (or whose ops never ran)."""


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's model inside DistributedDataParallel / DataParallel / torch.compile."""
    while True:
        kind = type(model).__name__
        if kind in ("DistributedDataParallel", "DataParallel") and hasattr(model, "module"):
            model = model.module
        elif kind == "OptimizedModule" and hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


# --------------------------------------------------------------------------- dtype helpers
def _is_low(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in LOW


def _promote(dtypes):
    result = None
    for d in dtypes:
        result = d if result is None else torch.promote_types(result, d)
    return result


def _cast_target(name, args, kwargs):
    """The dtype an explicit cast call asks for, or None (a device move, a query)."""
    if name in ("half", "bfloat16", "float", "double"):
        return {"half": torch.float16, "bfloat16": torch.bfloat16,
                "float": torch.float32, "double": torch.float64}[name]
    if name == "type_as" and len(args) > 1 and isinstance(args[1], torch.Tensor):
        return args[1].dtype
    candidates = [*args[1:], kwargs.get("dtype")]
    for value in candidates:
        if isinstance(value, torch.dtype):
            return value
        if name == "to" and isinstance(value, torch.Tensor):
            return value.dtype
    return None


def _in_place(func, name) -> bool:
    raw = getattr(func, "__name__", "")
    return (raw.endswith("_") and not raw.endswith("__")) or raw.startswith("__i") \
        or name == "setitem"


# --------------------------------------------------------------------------- the region mode
class _Tracker:
    """State shared by every region of one applied plan: which tensors are region-made
    fp32 and what dtype they stand in for, and how often each entry's ops ran."""

    def __init__(self):
        self.origin = WeakIdKeyDictionary()  # fp32 tensor made in a region → its low dtype
        self.hits = Counter()
        self.buffers = frozenset()  # ids of the model's buffers (written back when changed)
        self.weights = frozenset()  # ids of parameters and buffers
        self.pure = None  # pure mode's dtype: the one every weight has without the plan

    def origin_of(self, t):
        return self.origin.get(t) if isinstance(t, torch.Tensor) else None

    def dtype_seen(self, t):
        """The dtype a tensor has as far as the model outside the regions is concerned."""
        return self.origin_of(t) or t.dtype

    def track(self, out, origin):
        if origin is None or origin not in LOW:
            return
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                self.origin[t] = origin

    def origin_of_inputs(self, leaves):
        """The low dtype the tensors reaching an op stand in for. A parameter or buffer stands
        for the dtype it has without the plan: pure mode's dtype, also when the plan keeps it in
        fp32 (``1 + self.weight`` of a kept norm is a low value the region made fp32, and goes
        back to the low dtype when the region returns); under autocast, none."""
        dims = [self.pure if id(t) in self.weights else self.dtype_seen(t) for t in leaves
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() > 0
                and (id(t) not in self.weights or self.pure is not None)]
        return _promote(dims)

    def cast_back(self, tree):
        """Region-made fp32 tensors in ``tree`` back to the dtype they stand in for."""
        def back(t):
            origin = self.origin_of(t)
            return t.to(origin) if origin is not None and t.dtype == torch.float32 else t
        return pytree.tree_map_only(torch.Tensor, back, tree)


def _upcast(args, kwargs, which, buffers=frozenset()):
    """Copies of the selected tensors in fp32, and [(original, copy, version, is_buffer)]
    for writing in-place changes back."""
    copies = []

    def up(t):
        if not which(t):
            return t
        c = t.to(torch.float32)
        copies.append((t, c, _version(c), id(t) in buffers))
        return c

    args, kwargs = pytree.tree_map_only(torch.Tensor, up, (args, kwargs))
    return args, kwargs, copies


def _version(t):
    try:
        return t._version
    except RuntimeError:  # inference tensors have no version counter
        return None


def _changed(original, copy, version, is_buffer, in_place) -> bool:
    now = _version(copy)
    if version is not None and now != version:
        return True
    if is_buffer:  # kernels such as batch_norm update running stats without a version bump
        return bool(_bits_differ(copy.to(original.dtype), original).any())
    return version is None and in_place


def _bits_differ(a, b):
    """Element-wise: has ``a`` (a round trip of buffer ``b`` through fp32) another value than
    ``b``? Bit for bit, except that a NaN is still the same NaN: the round trip quiets and
    canonicalises NaN payloads, which must not count as a write."""
    if a.is_floating_point() and a.element_size() in _INT_VIEW:
        kind = _INT_VIEW[a.element_size()]
        differ = a.contiguous().view(kind) != b.contiguous().view(kind)
        return differ & ~(torch.isnan(a) & torch.isnan(b))
    return a != b


_INT_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _write_back(copies, out, in_place: bool):
    """In-place writes into an upcast copy go to the original; the original is returned."""
    swap = {}
    for original, copy, version, is_buffer in copies:
        if not _changed(original, copy, version, is_buffer, in_place):
            continue
        if is_buffer:  # only the elements that changed: NaN payloads elsewhere stay bit-identical
            with torch.no_grad():
                new = copy.to(original.dtype)
                original.copy_(torch.where(_bits_differ(new, original), new, original))
        elif original.requires_grad and original.is_leaf:
            with torch.no_grad():
                original.copy_(copy)
        else:
            original.copy_(copy)
        swap[id(copy)] = original
    if not swap:
        return out
    return pytree.tree_map_only(torch.Tensor, lambda t: swap.get(id(t), t), out)


_NAMES: dict = {}


def _op_name(func) -> str:
    """canonical_fn_name, memoised: it runs on every torch call inside a planned module."""
    try:
        return _NAMES[func]
    except KeyError:
        name = _NAMES[func] = canonical_fn_name(func)
        return name
    except TypeError:  # an unhashable callable
        return canonical_fn_name(func)


class _RegionMode(TorchFunctionMode):
    """Active while one planned module runs; ``ops`` None means every op is planned."""

    def __init__(self, tracker: _Tracker, ops, entry: int, calls=None):
        super().__init__()
        self.tracker, self.ops, self.entry = tracker, ops, entry
        self.calls = calls or {}  # op → the call numbers planned (``matmul#1``: {"matmul": {1}})
        self.seen = Counter()  # op → its calls so far in this call of the module

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) == "__get__":  # properties: shape, dtype, grad_fn
            return func(*args, **kwargs)
        name = _op_name(func)
        if name in QUERIES:
            return func(*args, **kwargs)
        if self._planned(name):
            if self.ops is not None:
                self.tracker.hits[self.entry] += 1
            return self._fp32(func, name, args, kwargs)
        if name in GEMM_OPS:
            return self._gemm(func, args, kwargs)
        if not len(self.tracker.origin):  # nothing region-made is alive: the call is untouched
            return func(*args, **kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        if any(self.tracker.origin_of(t) is not None for t in leaves):
            return self._mixed(func, name, args, kwargs, leaves)
        return func(*args, **kwargs)

    def _planned(self, name: str) -> bool:
        """Whether this call is one the entry plans: every op of a whole-module entry, an op
        it names, or the n-th call of an op it names by order (``matmul#1``)."""
        if self.ops is None or name in self.ops:
            return True
        wanted = self.calls.get(name)
        if wanted is None:
            return False
        self.seen[name] += 1
        return self.seen[name] in wanted

    def _fp32(self, func, name, args, kwargs):
        """A planned op: fp32 in, autocast off, fp32 out (tracked, unless autocast itself
        would have returned it in fp32: then it is fp32 without the plan too)."""
        tracker = self.tracker
        leaves = pytree.tree_leaves((args, kwargs))
        origin = tracker.origin_of_inputs(leaves)
        if name in CAST_FNS and self.ops is None:
            wanted = _cast_target(name, args, kwargs)
            if wanted in LOW:  # a whole-module region runs in fp32, casts down included
                source = args[0]
                return source.to(torch.float32) if _is_low(source) else source
        requested = kwargs.get("dtype")
        if requested in LOW and name not in CAST_FNS:  # arange(n, dtype=x.dtype), sum(dtype=...)
            kwargs, origin = {**kwargs, "dtype": torch.float32}, origin or requested
        elif name in FP32_CALLS and autocast_devices():
            origin = None
        with autocast_disabled():
            args, kwargs, copies = _upcast(args, kwargs, _is_low, tracker.buffers)
            out = func(*args, **kwargs)
        out = _write_back(copies, out, _in_place(func, name))
        if name not in CAST_FNS and not _in_place(func, name):
            tracker.track(out, origin)
        return out

    def _gemm(self, func, args, kwargs):
        """A GEMM the entry does not plan stays on the low-precision path. Region-made fp32
        operands go back to the dtype they stand in for. Without autocast, an fp32
        activation beside a low-precision operand goes to that dtype too: it is fp32 only
        because of the plan (``w.to(x.dtype)`` of a region-made ``x``), since without the
        plan the GEMM's operands share one dtype or it raises."""
        tracker = self.tracker
        if len(tracker.origin):
            args, kwargs = tracker.cast_back((args, kwargs))
        if autocast_devices():  # autocast casts the operands itself
            return func(*args, **kwargs)
        floats = [t for t in pytree.tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor) and t.is_floating_point()]
        low = {t.dtype for t in floats if t.dtype in LOW}
        if len(low) == 1 and any(t.dtype == torch.float32 and id(t) not in tracker.weights for t in floats):
            dtype = low.pop()
            args, kwargs = pytree.tree_map_only(
                torch.Tensor, lambda t: t.to(dtype) if t.dtype == torch.float32 and id(t) not in tracker.weights
                else t, (args, kwargs))
        return func(*args, **kwargs)

    def _mixed(self, func, name, args, kwargs, leaves):
        """An op that is not planned but receives a region-made fp32 tensor."""
        tracker = self.tracker
        if name in CAST_FNS or _in_place(func, name):
            return func(*args, **kwargs)  # an explicit dtype choice / the target's dtype rules
        origin = tracker.origin_of_inputs(leaves)
        if name in FP32_CALLS and kwargs.get("dtype") not in LOW and autocast_devices():
            origin = None  # autocast returns it in fp32 with or without the plan
        args, kwargs, copies = _upcast(args, kwargs, _is_low, tracker.buffers)
        out = _write_back(copies, func(*args, **kwargs), _in_place(func, name))
        tracker.track(out, origin)
        return out


def _planned_ops(names):
    """(canonical op names planned at every call, {op: call numbers planned}) of an entry's
    ``ops``; (None, {}) for a whole-module entry."""
    if names is None:
        return None, {}
    everywhere, calls = set(), {}
    for entry in names:
        name, number = split_op(entry)
        if number is None:
            everywhere.add(canonical_name(name))
        else:
            calls.setdefault(canonical_name(name), set()).add(number)
    return frozenset(everywhere), {op: frozenset(n) for op, n in calls.items()}


# --------------------------------------------------------------------------- the handle
class PlanHandle:
    """What ``apply_plan`` returns: ``remove()`` (or leaving a ``with`` block) undoes it.

    ``matched[i]`` lists the modules entry ``i`` applies to, ``unmatched`` the entries that
    match no module, ``hits[i]`` how many planned op calls entry ``i`` has intercepted.
    """

    def __init__(self, plan: OverridePlan, model: torch.nn.Module, compilable: bool = True):
        self.plan = plan
        self._compilable = compilable
        self._eager_modules = []
        self.model = model
        self.matched: dict[int, list[str]] = {}
        self.unmatched = []
        self._tracker = _Tracker()
        self._handles = []
        # the modes open per module call; per thread, as torch's mode stack itself is
        self._local = threading.local()

    @property
    def hits(self) -> Counter:
        return self._tracker.hits

    def unused_ops(self) -> list:
        """Op-level entries that matched modules but whose ops have not run (after a forward)."""
        return [o for i, o in enumerate(self.plan.overrides)
                if o.ops is not None and self.matched.get(i) and not self._tracker.hits[i]]

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for module in self._eager_modules:
            module.__dict__.pop("forward", None)
        self._eager_modules.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    # hooks ----------------------------------------------------------------------------
    def _stacks(self) -> dict:
        stacks = getattr(self._local, "stacks", None)
        if stacks is None:
            stacks = self._local.stacks = {}
        return stacks

    def _attach(self, index: int, override, module: torch.nn.Module):
        ops, calls = _planned_ops(override.ops)
        key = (index, id(module))
        whole = ops is None
        pure_dtype = (getattr(torch, self.plan.target["dtype"])
                      if self.plan.target.get("mode") == "pure" and "dtype" in self.plan.target
                      else None)
        tracker = self._tracker

        def pre(mod, args, kwargs):
            mode = _RegionMode(tracker, ops, index, calls)
            surrounding = None
            if whole:
                tracker.hits[index] += 1
                floats = [t for t in pytree.tree_leaves((args, kwargs))
                          if isinstance(t, torch.Tensor) and t.is_floating_point()]
                surrounding = _promote(tracker.dtype_seen(t) for t in floats) if floats else pure_dtype
                args, kwargs = pytree.tree_map_only(
                    torch.Tensor, lambda t: t.to(torch.float32) if t.dtype in LOW else t,
                    (args, kwargs))
            mode.__enter__()
            self._stacks().setdefault(key, []).append((mode, surrounding))
            return args, kwargs

        def post(mod, args, kwargs, out):
            stack = self._stacks().get(key)
            if not stack:
                return None
            mode, surrounding = stack.pop()
            mode.__exit__(None, None, None)
            if whole:
                if surrounding in LOW and any(self._stacks().values()):
                    # inside another region: the result flows on in fp32 like any region-made
                    # value (T5's wo feeding the planned residual add); that region casts back
                    tracker.track(out, surrounding)
                    return None
                if surrounding in LOW:
                    return pytree.tree_map_only(
                        torch.Tensor,
                        lambda t: t.to(surrounding) if t.dtype == torch.float32 else t, out)
                return None
            return tracker.cast_back(out)

        if self._compilable:
            pre, post = self._eager(module, pre, post)
        self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(module.register_forward_hook(post, with_kwargs=True, always_call=True))

    def _eager(self, module, pre, post):
        """Under torch.compile (compiled before or after the plan was applied) a planned
        module, its hooks included, runs eagerly: TorchDynamo cannot trace a mode switched on
        in one hook and off in another, so it breaks the graph around the region instead."""
        import torch._dynamo  # noqa: F401 - torch.compiler.disable needs it; 2 s: only here

        if "forward" not in module.__dict__:
            module.forward = torch.compiler.disable(module.forward)
            self._eager_modules.append(module)
        return torch.compiler.disable(pre), torch.compiler.disable(post)


def apply_plan(model: torch.nn.Module, plan, warn: bool = True, *, compilable: bool = True) -> PlanHandle:
    """Make the regions ``plan`` names run in fp32 inside ``model``; returns the undo handle.

    ``plan`` is a path to ``amp_plan.yaml``, a dict of it, or an ``OverridePlan``. An
    invalid plan raises ``PlanError`` (a ``ValueError``) naming the file and the entry;
    entries that match no module are listed in ``handle.unmatched`` and warned about.
    Parameters and buffers are not touched (``state_dict()`` stays bit-identical).
    Works with ``torch.compile`` applied before or after: the planned modules run eagerly
    (graph breaks around them); ``compilable=False`` skips that preparation (and importing
    TorchDynamo) for a model that is never compiled. Thread-safe: each thread's forward
    keeps its own region state.
    """
    plan = load_plan(plan)
    plan.require_pytorch()
    model = unwrap(model)
    handle = PlanHandle(plan, model, compilable)
    handle._tracker.buffers = frozenset(id(b) for b in model.buffers())
    handle._tracker.weights = handle._tracker.buffers | {id(p) for p in model.parameters()}
    if plan.target.get("mode") == "pure" and plan.target.get("dtype") in ("float16", "bfloat16"):
        handle._tracker.pure = getattr(torch, plan.target["dtype"])
    named = list(model.named_modules())
    for index, override in enumerate(plan.overrides):
        hits = [(name, m) for name, m in named if matches(override.module, name)]
        if not hits:
            handle.unmatched.append(override)
            if warn:
                warnings.warn(f"{plan.source}: override {override.module!r} matches no module "
                              f"of {type(model).__name__}", PlanWarning, stacklevel=2)
            continue
        handle.matched[index] = [name for name, _ in hits]
        for _, module in hits:
            handle._attach(index, override, module)
    if handle._tracker.pure is not None:
        _keep_kept_modules_in_fp32(handle, plan, named)
    return handle


def _keep_kept_modules_in_fp32(handle, plan, named):
    """Pure mode: a ``keep_fp32_modules`` module that no override names runs as a whole fp32
    region, as its fp32 weights need: its inputs come in low precision, and its GEMMs would
    otherwise be handed two dtypes, which CUDA refuses. Its outputs go back to the low dtype."""
    covered = {name for names in handle.matched.values() for name in names}
    kept = [name for name, _ in named if any(matches(p, name) for p in plan.keep_fp32_modules)]
    for index, name in enumerate(kept, start=len(plan.overrides)):
        inside = [k for k in kept if k != name and (name.startswith(k + ".") or k == "")]
        if name not in covered and not inside:
            handle._attach(index, Override(module=name), dict(named)[name])


def to_low_precision(model: torch.nn.Module, plan, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """Pure mode: ``model.to(dtype)`` (default: the plan's) except the plan's
    ``keep_fp32_modules`` and their submodules, whose parameters and buffers keep their
    dtype (Hugging Face's ``_keep_in_fp32_modules``). Converts in place, returns the model."""
    plan = load_plan(plan)
    plan.require_pytorch()
    dtype = dtype or getattr(torch, plan.target.get("dtype", "float16"))
    inner = unwrap(model)
    kept = kept_in_fp32(inner, plan.keep_fp32_modules)

    def convert(t):
        return t.to(dtype) if t.is_floating_point() else t

    for name, module in inner.named_modules():
        if not kept(name):
            module._apply(convert, recurse=False)
    return model


def kept_in_fp32(model: torch.nn.Module, patterns) -> object:
    """Whether a module path is one of ``patterns``' modules (``keep_fp32_modules``) or inside one."""
    kept = [name for name, _ in model.named_modules() if any(matches(p, name) for p in patterns)]
    return lambda name: any(name == k or name.startswith(k + ".") or k == "" for k in kept)
