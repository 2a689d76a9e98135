"""Where a variant first leaves the reference: hooks on every module and every op.

During the reference run a ``Probe`` keeps each module's and each torch call's
floating-point output (up to a memory budget); during a variant run it compares each
output with the reference's as it is produced, so the first op (and module) whose output
goes non-finite or out of tolerance is known without another execution. A first divergence
is an op whose inputs agree with the reference and whose output does not: values the
reference has too (a ``full(-inf)`` mask) and uninitialised memory (``empty``) are none,
and an op fed a diverged value only passes the divergence on. Ops are matched
by (module path, op name, occurrence): the casts a plan inserts do not shift them.
A variant that raises gets the op and module that raised.
"""
from __future__ import annotations

import os
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils.weak import WeakIdKeyDictionary

from ...capture.pytorch.recorder import user_frame
from ...runtime.pytorch.ops import CAST_FNS, QUERIES, canonical_fn_name
from ..metrics import BUDGET_ELEMENTS, divergence

_SKIP_OPS = CAST_FNS | QUERIES | {"copy_", "detach", "requires_grad_", "register_hook"}
#: uninitialised memory: what it holds differs from run to run and means nothing
_UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"})
#: what one kept output holds in memory besides its values (the tensor, its storage, the entry
#: that keeps it: ~740 bytes measured), in fp32 values: a loop of tiny ops stays in the budget
KEPT_OVERHEAD_ELEMENTS = 192


def user_line() -> str | None:
    """'file:line' of the innermost frame of user code (not torch, not precisionaudit)."""
    path, line, _ = user_frame()
    if path is None:
        return None
    shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
    return f"{shown}:{line}"


def _floats(out) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]


class _CallOutputTap(TorchFunctionMode):
    """Hands the probe each torch call's output (keyed by module, op and occurrence), and the
    call that raised."""

    def __init__(self, probe):
        super().__init__()
        self.probe = probe

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) == "__get__":
            return func(*args, **kwargs)
        name = canonical_fn_name(func)
        if name in _SKIP_OPS or name in _UNINITIALISED:
            return func(*args, **kwargs)
        probe = self.probe
        module = probe.stack[-1] if probe.stack else ""
        key = (module, name, probe.op_counts[(module, name)])
        probe.op_counts[(module, name)] += 1
        try:
            out = func(*args, **kwargs)
        except Exception:
            if probe.failure is None:
                probe.failure = {"module": module, "op": name, "line": user_line(), "kind": "error"}
            raise
        probe.on_op(key, out, (args, kwargs))
        return out


class Probe:
    """Module and op outputs of one run; compared against ``reference`` if given."""

    def __init__(self, model: torch.nn.Module, tol, reference: "Probe | None" = None):
        self.model, self.tol, self.reference = model, tol, reference
        self.modules: dict[str, torch.Tensor] = {}
        self.ops: dict[tuple, list] = {}
        self.stored = Counter()
        self.over_budget = Counter()  # kind → outputs not kept (so never compared): the budget was spent
        self.stack: list[str] = []
        self.calls = Counter()
        self.op_counts = Counter()
        self.rows: list[dict] = []  # variant: per module call, in completion order
        self.failure = None
        self.diverged = WeakIdKeyDictionary()  # variant tensors whose values left the reference
        self.first_op = {"nonfinite": None, "exceeds_tolerance": None}
        self.first_module = {"nonfinite": None, "exceeds_tolerance": None}
        self._handles = []

    # ------------------------------------------------------------------ attach / detach
    def __enter__(self):
        for name, module in self.model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._pre(name)))
            self._handles.append(module.register_forward_hook(self._post(name), always_call=True))
        self._tap = _CallOutputTap(self)
        self._tap.__enter__()
        return self

    def __exit__(self, *exc):
        self._tap.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False

    def _pre(self, name):
        def hook(module, args):
            self.stack.append(name)
        return hook

    def _post(self, name):
        def hook(module, args, out):
            if self.stack:
                self.stack.pop()
            count = self.calls[name]
            self.calls[name] += 1
            key = name if count == 0 else f"{name}#{count}"
            self._on_module(key, out)
        return hook

    # ------------------------------------------------------------------ recording
    def _keep(self, kind: str, out):
        leaves = _floats(out)
        size = sum(t.numel() + KEPT_OVERHEAD_ELEMENTS for t in leaves)
        if self.stored[kind] + size > BUDGET_ELEMENTS:
            self.over_budget[kind] += 1
            return None
        self.stored[kind] += size
        return [t.detach().to(torch.float32).clone() for t in leaves]

    def _measure(self, kind: str, key, out):
        """Reference run: keep the output, return None. Variant run: (rel_error, non-finite
        count, divergence kind or None) against the reference's output, None if unknown.
        The probe's own arithmetic is no op of the model: no mode sees it."""
        with torch._C.DisableTorchFunction():
            return self._measure_unseen(kind, key, out)

    def _measure_unseen(self, kind: str, key, out):
        if self.reference is None:
            kept = self._keep(kind, out)
            if kept is not None:
                getattr(self, kind)[key] = kept
            return None
        refs = getattr(self.reference, kind).get(key)
        return divergence(refs, [t.detach() for t in _floats(out)], self.tol) if refs is not None else None

    def _on_module(self, key, out):
        measured = self._measure("modules", key, out)
        if measured is None:
            return
        rel_error, bad, kind = measured
        row = {"module": key or "<root>", "rel_error": rel_error, "nonfinite": bad}
        self.rows.append(row)
        if kind and self.first_module[kind] is None:
            self.first_module[kind] = dict(row)

    def on_op(self, key, out, inputs=()):
        if self.reference is not None and all(v is not None for v in self.first_op.values()):
            return  # both kinds found: nothing left to learn from this run
        marks = set()
        if self.reference is not None:
            marks = {self.diverged.get(t) for t in pytree.tree_leaves(inputs)
                     if isinstance(t, torch.Tensor)} - {None}
        measured = self._measure("ops", key, out)
        if measured is None:
            inherited = "nonfinite" if "nonfinite" in marks else ("exceeds_tolerance" if marks else None)
            self._mark(out, inherited)
            return
        rel_error, bad, kind = measured
        self._mark(out, kind or ("exceeds_tolerance" if marks else None))
        # a first divergence of a kind: the inputs agree in that respect, the output does not
        agreed = not marks if kind == "exceeds_tolerance" else "nonfinite" not in marks
        if kind and agreed and self.first_op[kind] is None:
            self.first_op[kind] = {"module": key[0] or "<root>", "op": key[1], "line": user_line(),
                                   "rel_error": rel_error, "nonfinite": bad}

    def _mark(self, out, kind):
        """Remember which variant tensors left the reference (and how): what they flow into
        inherits the divergence instead of being blamed for it."""
        if kind is not None:
            for t in _floats(out):
                self.diverged[t] = kind

    # ------------------------------------------------------------------ results
    def first_divergence(self) -> dict | None:
        """The op that raised; else the first op (or module) gone non-finite; else the first
        out of tolerance."""
        if self.failure is not None:
            return dict(self.failure)
        for kind in ("nonfinite", "exceeds_tolerance"):
            op, module = self.first_op[kind], self.first_module[kind]
            if op is not None:
                return {**op, "kind": kind}
            if module is not None:
                return {**module, "op": None, "line": None, "kind": kind}
        return None
