"""PA431-PA433, read statically: Keras mixed precision in TensorFlow / Keras training scripts
(a custom GradientTape loop without loss scaling, loss scaling under bfloat16, a policy set
after the model is built). Each hazard by rule and line, each clean twin and idiomatic
correct code silent, every import spelling resolved by LibCST's qualified names."""
import pytest
from training_rules import Audit, sample

AUDIT = Audit("PA431", "PA432", "PA433")
findings, audit_code = AUDIT.findings, AUDIT.code


@pytest.mark.parametrize("stem,expected", [
    ("pa431_keras_fp16_loop_without_loss_scaling", [("PA431", 16)]),
    ("pa432_keras_loss_scale_under_bf16", [("PA432", 10)]),
    ("pa433_keras_policy_after_build", [("PA433", 7)]),
])
def test_each_hazard_is_found_at_its_line_and_its_clean_twin_is_silent(stem, expected):
    assert findings(sample(f"{stem}_hazard.py")) == expected
    assert findings(sample(f"{stem}_clean.py")) == []


def test_every_message_and_fix_is_filled_with_real_values():
    seen = AUDIT.rendered("pa43")
    assert set(seen) == set(AUDIT.ids)
    assert seen["PA431"].message.startswith("tape.gradient() computes gradients under the mixed_float16 "
                                            "policy (set on line 5)")
    assert "after tf.keras.applications.ResNet50(...) on line 6" in seen["PA433"].message
    assert seen["PA433"].fix["to"].endswith('(or pass dtype="mixed_float16" to those layers)')


LOOP = """
    {imports}
    {set_policy}

    def train(model, dataset, loss_fn):
        optimizer = {optimizer}
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
                {scale}
            grads = tape.gradient({loss}, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""


def loop(tmp_path, imports="import tensorflow as tf\nfrom tensorflow import keras",
         set_policy='keras.mixed_precision.set_global_policy("mixed_float16")',
         optimizer="keras.optimizers.Adam()", scale="", loss="loss"):
    code = LOOP.format(imports=imports.replace("\n", "\n    "), set_policy=set_policy, optimizer=optimizer,
                       scale=scale or "pass", loss=loss)
    return [rule for rule, _ in audit_code(tmp_path, code)]


@pytest.mark.parametrize("imports,set_policy", [
    ("import tensorflow as tf\nfrom tensorflow import keras", 'keras.mixed_precision.set_global_policy("mixed_float16")'),
    ("import tensorflow as tf", 'tf.keras.mixed_precision.set_global_policy("mixed_float16")'),
    ("import tensorflow as tf\nfrom tensorflow.keras import mixed_precision as mp",
     'mp.set_global_policy(mp.Policy("mixed_float16"))'),
    ("import tensorflow as tf\nimport keras", 'keras.config.set_dtype_policy("mixed_float16")'),
    ("import tensorflow as tf\nimport tf_keras", 'tf_keras.mixed_precision.set_global_policy("mixed_float16")'),
    ("import tensorflow as tf\nfrom tensorflow import keras",
     'keras.mixed_precision.experimental.set_policy("mixed_float16")'),
])
def test_a_plain_optimizer_in_a_float16_tape_loop_is_found_in_any_spelling(tmp_path, imports, set_policy):
    assert loop(tmp_path, imports=imports, set_policy=set_policy) == ["PA431"]


@pytest.mark.parametrize("kwargs", [
    # Keras 2's protocol: get_scaled_loss / get_unscaled_gradients
    dict(optimizer="keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam())",
         scale="scaled = optimizer.get_scaled_loss(loss)", loss="scaled"),
    # Keras 3's: scale_loss, then apply() unscales
    dict(optimizer="keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam())",
         scale="scaled = optimizer.scale_loss(loss)", loss="scaled"),
    # TF 1's automatic graph rewrite wraps the optimizer itself
    dict(optimizer="tf.train.experimental.enable_mixed_precision_graph_rewrite(keras.optimizers.Adam())"),
    # bfloat16 needs no scaling; float32 and an unknown policy say nothing
    dict(set_policy='keras.mixed_precision.set_global_policy("mixed_bfloat16")'),
    dict(set_policy='keras.mixed_precision.set_global_policy("float32")'),
    dict(set_policy="keras.mixed_precision.set_global_policy(args.policy)"),
    dict(set_policy=""),
])
def test_loss_scaling_another_policy_or_an_unknown_one_is_silent(tmp_path, kwargs):
    assert loop(tmp_path, **kwargs) == []


def test_fit_and_a_train_step_override_are_left_to_compile(tmp_path):
    """compile() wraps the optimizer in a LossScaleOptimizer under mixed_float16
    (keras/src/trainers/trainer.py): model.fit and a Model.train_step are not custom loops."""
    assert audit_code(tmp_path, """
        import tensorflow as tf
        import keras

        keras.mixed_precision.set_global_policy("mixed_float16")

        class Classifier(keras.Model):
            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    loss = self.compute_loss(y=y, y_pred=self(x, training=True))
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply(grads, self.trainable_variables)
                return {"loss": loss}

        def main(x, y):
            model = keras.Sequential([keras.layers.Dense(10)])
            model.compile(optimizer="adam", loss="mse")
            model.fit(x, y)
        """) == []


def test_a_policy_set_after_building_in_the_same_scope_only(tmp_path):
    assert audit_code(tmp_path, """
        import keras

        def make():                      # defined before, called after: not built yet
            return keras.Sequential([keras.layers.Dense(10)])

        inputs = keras.Input((8,))
        hidden = keras.layers.Dense(16)(inputs)
        keras.mixed_precision.set_global_policy("mixed_bfloat16")   # after the Dense: PA433
        model = make()

        def later():
            keras.mixed_precision.set_global_policy("mixed_float16")  # nothing built in here first
            return keras.layers.Dense(4)
        """) == [("PA433", 9)]


def test_loss_scaling_under_a_policy_that_may_be_float16_is_silent(tmp_path):
    assert audit_code(tmp_path, """
        import keras

        policy = "mixed_bfloat16" if on_tpu else "mixed_float16"
        keras.mixed_precision.set_global_policy(policy)
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam())
        """) == []


def test_a_policy_set_in_another_function_does_not_govern_the_loop(tmp_path):
    """tf-models' nn_blocks_test.py: one test method sets mixed_float16, another trains a
    layer with a plain optimizer under the default float32 policy."""
    assert audit_code(tmp_path, """
        import tensorflow as tf
        import tf_keras

        class Test(tf.test.TestCase):
            def test_train_step(self):
                optimizer = tf_keras.optimizers.Adam()
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(self.layer(self.x))
                grads = tape.gradient(loss, self.layer.trainable_variables)
                optimizer.apply_gradients(zip(grads, self.layer.trainable_variables))

            def test_float16(self):
                tf_keras.mixed_precision.set_global_policy("mixed_float16")
                self.layer(self.x)

            def test_loss_scale(self):
                optimizer = tf_keras.mixed_precision.LossScaleOptimizer(tf_keras.optimizers.Adam())

            def test_bfloat16(self):
                tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
        """) == []


def test_a_policy_set_earlier_in_the_same_function_governs_it(tmp_path):
    assert audit_code(tmp_path, """
        import tensorflow as tf
        import tf_keras

        def test_train_step(layer, x):
            tf_keras.mixed_precision.set_global_policy("mixed_float16")
            optimizer = tf_keras.optimizers.Adam()
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x))
            return tape.gradient(loss, layer.trainable_variables)
        """) == [("PA431", 10)]
