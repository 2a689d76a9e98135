"""PA431 keras-fp16-loop-without-loss-scaling: a ``tf.GradientTape`` loop under the
``mixed_float16`` policy with no loss scaling anywhere in the script. A ``Model.train_step``
steps the optimizer ``compile()`` wrapped, and is not reported, unless the class's
``compile()`` override keeps its own optimizers and gives Keras none (a GAN's
``d_optimizer``/``g_optimizer``): those are never wrapped (frameworks/keras.py)."""
from ..keras_policy import keras_training, mentions_keras_policy, optimizers_compile_leaves_plain
from ..registry import TrainingHit, training_check


@training_check("PA431", mentions=mentions_keras_policy)
def check(script):
    found = keras_training(script)
    if found.loss_scaling:
        return
    for call, scopes in found.gradients:
        fp16 = [p for p in found.policies_at(script, call, scopes) if p.policy == "mixed_float16"]
        plain = optimizers_compile_leaves_plain(script, call)
        if not fp16 or script.enclosing(call).endswith(".train_step") and plain is None:
            continue  # Model.train_step: the optimizer is the one compile() wrapped
        why = (f" ({plain}, kept by the compile() override, which calls super().compile() with no optimizer: "
               "Keras wraps only the optimizer compile() receives in a LossScaleOptimizer)") if plain else ""
        line, column = script.line_column(call)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(call),
                          subject=script.source(call.func),
                          values={"gradient": script.source(call.func), "why": why,
                                  "policy_line": script.line_column(fp16[-1].call)[0]})
