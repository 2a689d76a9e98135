"""The deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` names (PA409): where a script
uses them, what each use becomes under ``torch.amp``, and which uses ``--fix`` can rewrite
(``rewritable``). Shared by the rule's check and by ``fix.py``, so the message, the
``autofix`` flag and the rewrite never disagree.

torch 2.13's ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`` is
``torch.amp.autocast("cuda", dtype=..., enabled=..., cache_enabled=...)``: the device comes
first and the positional order differs, so positional arguments become keywords.
``GradScaler``'s arguments keep their order after the device. ``custom_fwd`` and
``custom_bwd`` need ``device_type=`` as a keyword (torch/amp/autocast_mode.py).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .syntax import DEFS

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
MEMBERS = frozenset(member for member, _ in DEPRECATED.values())
#: the old autocast's positional parameters, in order (they become keywords)
OLD_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
#: modules whose from-imports are rewritten
MODULES = {"torch.cuda.amp": "torch.amp", "torch.cpu.amp": "torch.amp",
           "torch.cuda.amp.autocast_mode": "torch.amp.autocast_mode",
           "torch.cuda.amp.grad_scaler": "torch.amp.grad_scaler",
           "torch.cpu.amp.autocast_mode": "torch.amp.autocast_mode",
           "torch.cpu.amp.grad_scaler": "torch.amp.grad_scaler"}
#: the words a file needs for PA409 to read it
DEPRECATED_WORDS = ("torch.cuda.amp", "torch.cpu.amp", "custom_fwd", "custom_bwd", "import amp")
#: the new API's spelling: a branch or try body that uses it makes the old name a fallback
_NEW_API = "torch.amp."


def mentions_deprecated_amp(text: str) -> bool:
    """Whether PA409 may find anything in a file with this text."""
    return any(w in text for w in DEPRECATED_WORDS)


@dataclass
class Use:
    """One use of a deprecated name: the Name/Attribute node, what it stands for, how it is
    used (``call``: called, ``decorator``: a bare decorator, ``other``: as a value, in an
    ``isinstance``, as a base class...)."""

    node: object
    qualified: str
    member: str
    device: str
    how: str

    @property
    def replacement(self) -> str:
        if self.member in ("custom_fwd", "custom_bwd"):
            return f'torch.amp.{self.member}(device_type="{self.device}")'
        return f'torch.amp.{self.member}("{self.device}", ...)'


def deprecated_uses(script) -> list:
    """Every use of a deprecated AMP name in ``script``, in source order."""
    return script.once(_uses)


def _uses(script) -> list:
    index, found = script.index, []
    for chain in index.chains():
        for node in reversed(chain):  # the longest spelling first: torch.cuda.amp.autocast, not torch.cuda
            every = script.names_of(node)
            names = every & set(DEPRECATED)
            if not names:
                continue
            # ``try: from torch.amp import GradScaler / except: from torch.cuda.amp import
            # GradScaler``, ``if is_torch_version(">=", "2.3"): ... else: torch.cuda.amp...``:
            # the old name is a deliberate fallback for an old torch, not a use to rewrite
            if not every - names and not _gated(script, node):
                qualified = sorted(names)[0]
                member, device = DEPRECATED[qualified]
                found.append(Use(node, qualified, member, device, _how(index, node)))
            break
    return sorted(found, key=lambda u: script.position(u.node))


def _how(index, node) -> str:
    parent = index.parents.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return "call"
    if isinstance(parent, DEFS) and any(d is node for d in parent.decorator_list):
        return "decorator"
    return "other"


def _gated(script, node) -> bool:
    """Whether ``node`` sits where an old torch is handled: under an ``if`` whose test is a
    torch version check, in a conditional expression whose other branch is the new API, or
    in the handler of a ``try`` whose body uses the new API (timm's NativeScaler)."""
    parents = script.index.parents
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and _is_version_gate(script.source(parent.test)):
            return True
        if isinstance(parent, ast.IfExp) and (_is_version_gate(script.source(parent.test)) or _NEW_API in (
                script.source(parent.body) + script.source(parent.orelse))):
            return True
        if isinstance(parent, ast.ExceptHandler) and isinstance(parents.get(parent), ast.Try):
            body = parents[parent].body
            if _NEW_API in "".join(script.source(s) for s in body):
                return True
        parent = parents.get(parent)
    return False


def _is_version_gate(test: str) -> bool:
    """An if-test that picks code by the installed torch (``is_torch_version(...)``,
    ``torch.__version__ >= ...``, ``hasattr(torch, "amp")``)."""
    low = test.lower()
    return ("version" in low or ("hasattr" in low and "amp" in low) or "greater" in low
            or re.search(r"torch\w*_\d+_\d+", low) is not None)  # _TORCH_GREATER_EQUAL_2_4, TORCH_1_10


# ----------------------------------------------------------------------------- what --fix rewrites
def rewritable(script) -> tuple[list, dict]:
    """(the uses ``--fix`` rewrites, {id of a ``from torch.cuda.amp import ...``: that
    import} for the imports rewritten with them). A name bound by such an import is
    rewritten only together with its import, and only when every use of every name the
    import binds can be (a name passed around as a value would be called later without
    its device); an attribute spelling (``torch.cuda.amp.autocast(...)``) is rewritten alone."""
    return script.once(_rewritable)


def _rewritable(script):
    imports = deprecated_imports(script)
    fixable, by_import = [], {}
    for use in deprecated_uses(script):
        node = use.node
        if isinstance(node, ast.Name):
            importer = imports.get(node.id)
            if importer is not None:
                by_import.setdefault(id(importer), []).append(use)
        elif _root_is_torch(script, node) and use.how != "other":
            fixable.append(use)
    rewritten = {}
    for group in by_import.values():
        importer = imports[group[0].node.id]
        if all(u.how != "other" for u in group) and _all_names_used_fixably(script, importer, imports, group):
            fixable += group
            rewritten[id(importer)] = importer
    return sorted(fixable, key=lambda u: script.position(u.node)), rewritten


def deprecated_imports(script) -> dict:
    """local name -> the ``from torch.cuda.amp import ...`` binding it, for imports whose
    every name is a deprecated member (others are left alone); a name two imports bind is
    left alone."""
    found, ambiguous = {}, set()
    for node in ast.walk(script.tree):
        if not isinstance(node, ast.ImportFrom) or node.level or node.module not in MODULES:
            continue
        if not all(a.name in MEMBERS for a in node.names):
            continue
        for alias in node.names:
            local = alias.asname or alias.name
            if local in found:
                ambiguous.add(local)
            found[local] = node
    return {k: v for k, v in found.items() if k not in ambiguous}


def _all_names_used_fixably(script, importer, imports, group) -> bool:
    """Every reference to a name the import binds is among ``group``'s uses (a name read
    somewhere not resolved to the deprecated API would break)."""
    locals_ = {name for name, node in imports.items() if node is importer}
    seen = {id(u.node) for u in group}
    return not any(isinstance(n, ast.Name) and n.id in locals_ and id(n) not in seen for n in ast.walk(script.tree))


def _root_is_torch(script, node) -> bool:
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id == "torch" and script.names_of(root) == {"torch"}
