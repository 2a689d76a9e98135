"""PA431 keras-fp16-loop-without-loss-scaling: a ``tf.GradientTape`` loop under the
``mixed_float16`` policy with no loss scaling anywhere in the script."""
from ..keras_policy import keras_training, mentions_keras_policy
from ..registry import TrainingHit, training_check


@training_check("PA431", mentions=mentions_keras_policy)
def check(script):
    found = keras_training(script)
    if found.loss_scaling:
        return
    for call, scopes in found.gradients:
        fp16 = [p for p in found.policies_at(script, call, scopes) if p.policy == "mixed_float16"]
        if not fp16 or script.enclosing(call).endswith(".train_step"):
            continue  # Model.train_step: the optimizer is the one compile() wrapped
        line, column = script.line_column(call)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(call),
                          subject=script.source(call.func),
                          values={"gradient": script.source(call.func),
                                  "policy_line": script.line_column(fp16[-1].call)[0]})
