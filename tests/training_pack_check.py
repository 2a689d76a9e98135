"""The check of tests/training_pack/EX401.yaml: each call of ``risky(...)`` in a script.
Importing this module registers it (as the bundled training checks register)."""
import ast

from precisionaudit.training.registry import TrainingHit, training_check


@training_check("EX401", reads="script")
def risky_calls(script):
    for node in script.index.calls:
        if isinstance(node.func, ast.Name) and node.func.id == "risky":
            line, column = script.line_column(node)
            yield TrainingHit(line=line, column=column, values={"call": "risky"}, scope="", subject="risky")
