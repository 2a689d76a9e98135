"""PA431 keras-fp16-loop-without-loss-scaling: Keras mixed precision in a TensorFlow / Keras
training script. The hazard sample, its clean twin, the rule page's Example and Use instead, and
the ways real code is written."""
import pytest
from training_rules import Audit, assert_page_examples, keras_loop

AUDIT = Audit("PA431", "PA432", "PA433")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    seen = AUDIT.pair("pa431_keras_fp16_loop_without_loss_scaling", [("PA431", 16)])
    assert seen["PA431"].message.startswith("tape.gradient() computes gradients under the mixed_float16 "
                                            "policy (set on line 5)")


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
    assert keras_loop(tmp_path, imports=imports, set_policy=set_policy) == ["PA431"]


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


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA431", tmp_path)
