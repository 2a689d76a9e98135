"""Stages import downward only, without cycles, and meet at public names.

The stage order is ``LAYERS`` in bench/layout_counts.py (the script that prints the counts):
a module imports its own stage or a stage of a lower layer, and no group of modules imports
one another round a loop.

No module reaches into another stage's private names either. A stage is a part of the
package that ``LAYERS`` names (``core``, ``capture``, ``plan.file``, ``cli``...). What a stage keeps private (a leading underscore) may change without notice, so a module of
another stage that imports it, or reads it off an imported module, is coupled to a detail
(as ``runner._check_reference`` and ``onnx_model._source_of`` once were). The walk reads
the source with ``ast``: nothing is imported, so it sees imports inside functions too.
"""
import ast
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import networkx as nx  # noqa: E402
from layout_counts import (LAYERS, PACKAGE, SUFFIX_TEST, against_the_order, cycles, dispatch_sites,  # noqa: E402
                           import_graph, imported_from,
                           module_name, stage, upward_imports)


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


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


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_its_stages():
    stages = {stage(module_name(p)) for p in modules()}
    assert {"core", "ir", "runtime", "capture", "analysis", "rules", "settings", "report", "plan",
            "plan.file", "apply", "check", "prune", "cli"} <= stages
    assert stages <= {s for layer in LAYERS for s in layer}


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
    "from ...runtime.onnx.graph import name_nodes",
    "from torch.utils import _pytree",  # torch's privates are torch's concern
])
def test_the_walk_lets_public_and_own_names_pass(source):
    assert private_reaches(source, "precisionaudit.capture.pytorch.capture") == []


def test_every_package_is_in_the_distribution():
    """pyproject.toml lists the packages: a stage left out installs without it (editable
    installs, as in the tests, would not notice)."""
    import tomllib

    with open(PACKAGE.parent / "pyproject.toml", "rb") as fh:
        listed = set(tomllib.load(fh)["tool"]["setuptools"]["packages"])
    assert {module_name(p) for p in PACKAGE.rglob("__init__.py")} <= listed


def test_no_module_imports_against_the_stage_order():
    assert upward_imports(import_graph()) == []


def test_no_modules_import_one_another_round_a_loop():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("importer, imported", [
    ("capture.pytorch.calibration", "check.pytorch.runner"),  # a higher stage
    ("report.text", "plan.pytorch"),  # a sibling of the same layer
    ("plan.file", "plan.pytorch"),  # the plan's schema is below the planner
    ("runtime.onnx.io", "capture.onnx.model"),
    ("prune.onnx", "cli"),
    ("check.pytorch.runner", "frontend.pytorch"),  # the frontends sit above what they call
    ("settings.policy", "scanner"),  # settings is policy over findings, below the manager
    ("frontend.onnx", "scanner"),
])
def test_an_import_up_or_across_is_against_the_order(importer, imported):
    assert against_the_order(f"precisionaudit.{importer}", f"precisionaudit.{imported}")


@pytest.mark.parametrize("importer, imported", [
    ("check.onnx.runner", "plan.file"),
    ("plan.pytorch", "plan.file"),
    ("capture.pytorch.capture", "runtime.pytorch.emulation"),
    ("prune.pytorch", "check.pytorch.runner"),
    ("check.pytorch.runner", "check.metrics"),  # within a stage
    ("report.json_report", "precisionaudit"),  # the package's version
    ("scanner", "frontend"),
    ("frontend.onnx", "prune.onnx"),
    ("scanner", "settings.policy"),
])
def test_an_import_down_or_within_a_stage_is_in_order(importer, imported):
    imported = imported if imported == "precisionaudit" else f"precisionaudit.{imported}"
    assert not against_the_order(f"precisionaudit.{importer}", imported)


def test_a_loop_of_three_modules_is_one_cycle():
    graph = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_kind_of_a_file_is_decided_in_the_frontends_only():
    """No ``.endswith(".onnx")`` anywhere, and the suffix tests left are the frontends' one
    dispatch, the directory walk (which files a scan looks at: the frontends' SUFFIXES) and
    tests that are not about a model's kind (weight shards, rule files, comments in Python)."""
    assert dispatch_sites() == []
    assert {s.rsplit(":", 1)[0] for s in dispatch_sites(SUFFIX_TEST)} <= {
        "precisionaudit/frontend/__init__.py", "precisionaudit/scanner.py",
        "precisionaudit/runtime/pytorch/weights.py", "precisionaudit/rules/engine.py",
        "precisionaudit/settings/suppressions.py"}
