"""PA433 keras-policy-after-build: the global mixed policy is set after layers or a model
were built in the same function, so they keep the policy they were built with."""
from ..keras_policy import keras_training, mentions_keras_policy
from ..registry import TrainingHit, training_check


@training_check("PA433", mentions=mentions_keras_policy)
def check(script):
    found = keras_training(script)
    for policy in found.policies:
        if not (policy.policy or "").startswith("mixed_"):
            continue
        line, column = script.line_column(policy.call)
        before = [(call, name) for call, name, scope in found.builds
                  if scope is policy.scope and script.line_column(call)[0] < line]
        if before:
            call, name = before[0]
            yield TrainingHit(line=line, column=column, scope=script.enclosing(policy.call),
                              subject=script.source(policy.call.func),
                              values={"policy": policy.policy, "built": script.source(call.func),
                                      "built_line": script.line_column(call)[0]})
