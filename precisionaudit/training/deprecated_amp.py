"""The deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` names (PA409): where a script
uses them, and what each use becomes under ``torch.amp``. Shared by the rule's check and
by ``fix.py``, so the message and the rewrite never disagree.

torch 2.13's ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`` is
``torch.amp.autocast("cuda", dtype=..., enabled=..., cache_enabled=...)``: the device comes
first and the positional order differs, so positional arguments become keywords.
``GradScaler``'s arguments keep their order after the device. ``custom_fwd`` and
``custom_bwd`` need ``device_type=`` as a keyword (torch/amp/autocast_mode.py).
"""
from __future__ import annotations

import re

from dataclasses import dataclass

import libcst as cst

#: deprecated qualified name -> (torch.amp member, device)
DEPRECATED = {
    "torch.cuda.amp.autocast": ("autocast", "cuda"),
    "torch.cuda.amp.autocast_mode.autocast": ("autocast", "cuda"),
    "torch.cuda.amp.GradScaler": ("GradScaler", "cuda"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("GradScaler", "cuda"),
    "torch.cuda.amp.custom_fwd": ("custom_fwd", "cuda"),
    "torch.cuda.amp.autocast_mode.custom_fwd": ("custom_fwd", "cuda"),
    "torch.cuda.amp.custom_bwd": ("custom_bwd", "cuda"),
    "torch.cuda.amp.autocast_mode.custom_bwd": ("custom_bwd", "cuda"),
    "torch.cpu.amp.autocast": ("autocast", "cpu"),
    "torch.cpu.amp.autocast_mode.autocast": ("autocast", "cpu"),
    "torch.cpu.amp.GradScaler": ("GradScaler", "cpu"),
    "torch.cpu.amp.grad_scaler.GradScaler": ("GradScaler", "cpu"),
}
#: the old autocast's positional parameters, in order (they become keywords)
OLD_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
#: modules whose from-imports are rewritten
MODULES = {"torch.cuda.amp": "torch.amp", "torch.cpu.amp": "torch.amp",
           "torch.cuda.amp.autocast_mode": "torch.amp.autocast_mode",
           "torch.cuda.amp.grad_scaler": "torch.amp.grad_scaler",
           "torch.cpu.amp.autocast_mode": "torch.amp.autocast_mode",
           "torch.cpu.amp.grad_scaler": "torch.amp.grad_scaler"}


@dataclass
class Use:
    """One use of a deprecated name: the Name/Attribute node, what it stands for, how it is
    used (``call``: called, ``decorator``: a bare decorator, ``other``)."""

    node: object
    qualified: str
    member: str
    device: str
    how: str
    call: object = None

    @property
    def replacement(self) -> str:
        if self.member in ("custom_fwd", "custom_bwd"):
            return f'torch.amp.{self.member}(device_type="{self.device}")'
        return f'torch.amp.{self.member}("{self.device}", ...)'


class _Uses(cst.CSTVisitor):
    def __init__(self, script):
        self.script = script
        self.found: list = []
        self.calls: dict = {}
        self.decorators: set = set()
        self.gates: list = []
        self.tries: list = []  # per enclosing try: whether its body uses the new torch.amp names

    def visit_If(self, node):
        self.gates.append(_is_version_gate(self.script.module.code_for_node(node.test)))

    def leave_If(self, node):
        self.gates.pop()

    def visit_IfExp(self, node):
        """``torch.amp.GradScaler(...) if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()``
        (Lightning): the other branch is the new name, or the test the torch version."""
        code = self.script.module.code_for_node
        self.gates.append(_is_version_gate(code(node.test)) or _NEW_API in code(node.body) + code(node.orelse))

    def leave_IfExp(self, node):
        self.gates.pop()

    def visit_Try(self, node):
        self.tries.append(_NEW_API in self.script.module.code_for_node(node.body))

    def leave_Try(self, node):
        self.tries.pop()

    def visit_ExceptHandler(self, node):
        """``try: torch.amp.GradScaler(device=...) / except (AttributeError, TypeError):
        torch.cuda.amp.GradScaler()`` (timm): the handler is the old torch's fallback."""
        self.gates.append(bool(self.tries) and self.tries[-1])

    def leave_ExceptHandler(self, node):
        self.gates.pop()

    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False

    def visit_Call(self, node):
        self.calls[id(node.func)] = node

    def visit_Decorator(self, node):
        self.decorators.add(id(node.decorator))

    def _use(self, node):
        every = self.script.names_of(node)
        names = every & set(DEPRECATED)
        if not names:
            return True
        if every - names or any(self.gates):
            # ``try: from torch.amp import GradScaler / except: from torch.cuda.amp import
            # GradScaler``, ``if is_torch_version(">=", "2.3"): ... else: torch.cuda.amp...``:
            # the old name is a deliberate fallback for an old torch, not a use to rewrite
            return False
        qualified = sorted(names)[0]
        member, device = DEPRECATED[qualified]
        call = self.calls.get(id(node))
        how = "call" if call is not None else ("decorator" if id(node) in self.decorators else "other")
        self.found.append(Use(node, qualified, member, device, how, call))
        return False

    def visit_Attribute(self, node):
        return self._use(node)

    def visit_Name(self, node):
        self._use(node)


def deprecated_uses(script) -> list:
    """Every use of a deprecated AMP name in ``script``, in source order."""
    return script.once(_uses)


def _uses(script) -> list:
    visitor = _Uses(script)
    script.module.visit(visitor)
    return visitor.found


def _is_version_gate(test: str) -> bool:
    """An if-test that picks code by the installed torch (``is_torch_version(...)``,
    ``torch.__version__ >= ...``, ``hasattr(torch, "amp")``)."""
    low = test.lower()
    return ("version" in low or ("hasattr" in low and "amp" in low) or "greater" in low
            or re.search(r"torch\w*_\d+_\d+", low) is not None)  # _TORCH_GREATER_EQUAL_2_4, TORCH_1_10


#: the new API's spelling: a branch or try body that uses it makes the old name a fallback
_NEW_API = "torch.amp."
