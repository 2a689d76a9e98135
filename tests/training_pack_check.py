"""The check of tests/training_pack/EX401.yaml: each call of ``risky(...)`` in a script.
Importing this module registers it (as the bundled training checks register)."""
import libcst as cst

from precisionaudit.training.registry import TrainingHit, training_check


@training_check("EX401", reads="script")
def risky_calls(script):
    for node in _calls(script.module):
        line, column = script.line_column(node)
        yield TrainingHit(line=line, column=column, values={"call": "risky"}, scope="", subject="risky")


def _calls(module):
    found = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "risky":
                found.append(node)

    module.visit(Calls())
    return found
