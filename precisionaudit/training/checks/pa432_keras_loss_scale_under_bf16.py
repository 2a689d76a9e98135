"""PA432 keras-loss-scale-under-bf16: a LossScaleOptimizer in a script whose policy is
``mixed_bfloat16`` and never ``mixed_float16``."""
import ast

from ..keras_policy import SCALES_LOSS, keras_training, mentions_keras_policy
from ..registry import TrainingHit, training_check


@training_check("PA432", mentions=mentions_keras_policy)
def check(script):
    found = keras_training(script)
    for node, scopes in found.loss_scaling:
        if not isinstance(node, ast.Call) or (isinstance(node.func, ast.Attribute)
                                              and node.func.attr in SCALES_LOSS):
            continue  # the wrapper's construction is the finding, not each use
        policies = found.policies_at(script, node, scopes)
        if not policies or {p.policy for p in policies} != {"mixed_bfloat16"}:
            continue  # another (or an unknown) policy may be the one that runs
        line, column = script.line_column(node)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(node),
                          subject=script.source(node.func),
                          values={"optimizer": script.source(node.func),
                                  "policy_line": script.line_column(policies[-1].call)[0]})
