"""The training stage keeps its shape (issue 37): one value type, one wording of a path
condition, one visitor that indexes calls, one per-script cache, one table of GradScaler
names, no class of 250 lines or more; counted from the source by bench/layout_counts.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from layout_counts import training_counts  # noqa: E402


def test_one_of_each_and_no_class_of_250_lines():
    counts = training_counts()
    lines, longest = counts.pop("longest class")
    assert {measure: len(found) for measure, found in counts.items()} == {
        "value types": 1, "condition wordings": 1, "visitors that index calls": 1, "per-script caches": 1,
        "GradScaler name tables": 1}, counts
    assert lines < 250, longest


def test_the_analysis_reads_ast_and_only_the_fix_imports_libcst():
    """LibCST is the rewriter (``--fix``) and the arbiter of a file CPython cannot parse;
    nothing that reads a script imports it at module level."""
    import ast
    import pathlib

    training = pathlib.Path(__file__).resolve().parent.parent / "precisionaudit" / "training"
    importers = {str(p.relative_to(training)) for p in training.rglob("*.py")
                 for node in ast.parse(p.read_text()).body if isinstance(node, (ast.Import, ast.ImportFrom))
                 and "libcst" in ast.unparse(node)}
    assert importers == set()
