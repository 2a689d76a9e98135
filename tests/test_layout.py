"""Stages meet at public names: no module reaches into another stage's private ones.

A stage is a top-level part of the package (``core``, ``capture``, ``check``, ``cli``...).
What a stage keeps private (a leading underscore) may change without notice, so a module of
another stage that imports it, or reads it off an imported module, is coupled to a detail
(as ``runner._check_reference`` and ``onnx_model._source_of`` once were). The walk reads
the source with ``ast``: nothing is imported, so it sees imports inside functions too.
"""
import ast
from pathlib import Path

import pytest

import precisionaudit

PACKAGE = Path(precisionaudit.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> str:
    """``precisionaudit.check.onnx.runner`` → ``check``; the package itself is ``precisionaudit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_reaches(source: str, module: str, is_package: bool = False) -> list[str]:
    """'line: module.name' for each private name of another stage that ``source`` uses."""
    tree = ast.parse(source)
    found, bound = [], {}  # bound: local name → package module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = imported_from(node, module, is_package)
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if full.startswith("precisionaudit."):
                    bound[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "precisionaudit":
                    continue
                bound[alias.asname or "precisionaudit"] = alias.name if alias.asname else "precisionaudit"
                if stage(alias.name) != stage(module) and any(map(private, alias.name.split("."))):
                    found.append(f"{node.lineno}: {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = imported_from(node, module, is_package)
            if not source_module.startswith("precisionaudit"):
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if stage(full) != stage(module) and any(map(private, full.split("."))):
                    found.append(f"{node.lineno}: {full}")
        elif isinstance(node, ast.Attribute) and private(node.attr):
            dotted = _dotted(node.value, bound)
            if dotted and stage(dotted) != stage(module):
                found.append(f"{node.lineno}: {dotted}.{node.attr}")
    return found


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The package module an expression like ``runner`` or ``precisionaudit.check`` names."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_its_stages():
    stages = {stage(module_name(p)) for p in modules()}
    assert {"core", "ir", "capture", "analysis", "rules", "settings", "report", "plan", "apply",
            "check", "cli"} <= stages


def test_no_module_uses_another_stages_private_names():
    reaches = [f"{path.relative_to(PACKAGE.parent)}:{reach}" for path in modules()
               for reach in private_reaches(path.read_text(), module_name(path), path.name == "__init__.py")]
    assert len(modules()) > 50 and reaches == []


@pytest.mark.parametrize("source, expected", [
    ("from precisionaudit.check.pytorch.runner import _check_reference", "check.pytorch.runner._check_reference"),
    ("from ..check.pytorch import runner\nrunner._check_reference()", "check.pytorch.runner._check_reference"),
    ("def f():\n    from ..capture.onnx.model import _source_of", "capture.onnx.model._source_of"),
    ("import precisionaudit.capture.pytorch as pt\npt._split_inputs", "capture.pytorch._split_inputs"),
    ("import precisionaudit\nprecisionaudit.capture._private", "capture._private"),
])
def test_the_walk_finds_a_reach_into_a_private(source, expected):
    found = private_reaches(source, "precisionaudit.plan.pytorch")
    assert [line.split(": ")[1] for line in found] == [f"precisionaudit.{expected}"]


@pytest.mark.parametrize("source", [
    "from precisionaudit import __version__",
    "from .recorder import _helper",  # the same stage keeps its own privates
    "from ...capture.onnx.graph import name_nodes",
    "from torch.utils import _pytree",  # torch's privates are torch's concern
])
def test_the_walk_lets_public_and_own_names_pass(source):
    assert private_reaches(source, "precisionaudit.capture.pytorch.capture") == []
