"""PA432 keras-loss-scale-under-bf16: Keras mixed precision in a TensorFlow / Keras training
script. The hazard sample, its clean twin, the rule page's Example and Use instead, and the ways
real code is written."""
import pytest
from training_rules import Audit, assert_page_examples, keras_loop

AUDIT = Audit("PA431", "PA432", "PA433")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    AUDIT.pair("pa432_keras_loss_scale_under_bf16", [("PA432", 10)])


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
    assert keras_loop(tmp_path, **kwargs) == []


def test_loss_scaling_under_a_policy_that_may_be_float16_is_silent(tmp_path):
    assert audit_code(tmp_path, """
        import keras

        policy = "mixed_bfloat16" if on_tpu else "mixed_float16"
        keras.mixed_precision.set_global_policy(policy)
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam())
        """) == []


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA432", tmp_path)
