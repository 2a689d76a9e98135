"""PA433 keras-policy-after-build: Keras mixed precision in a TensorFlow / Keras training script.
The hazard sample, its clean twin, the rule page's Example and Use instead, and the ways real
code is written."""
from training_rules import Audit, assert_page_examples

AUDIT = Audit("PA431", "PA432", "PA433")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    seen = AUDIT.pair("pa433_keras_policy_after_build", [("PA433", 7)])
    assert "after tf.keras.applications.ResNet50(...) on line 6" in seen["PA433"].message
    assert seen["PA433"].fix["to"].endswith('(or pass dtype="mixed_float16" to those layers)')


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


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA433", tmp_path)
