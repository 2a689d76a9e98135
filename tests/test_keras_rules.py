"""PA501 (output layer not float32) and PA502 (policy bypassed by a custom layer) on Keras models,
with strict templates: a placeholder no check fills makes the scan fail."""
import os
import textwrap

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")  # as precisionaudit selects it; keras reads it once
pytest.importorskip("keras")

from conftest import ROOT  # noqa: E402

from precisionaudit.core.numerics import Target  # noqa: E402
from precisionaudit.rules.engine import load_rules  # noqa: E402
from precisionaudit.scanner import scan  # noqa: E402

KERAS_SAMPLES = os.path.join(ROOT, "samples", "keras")


def findings(path, device="cuda"):
    results, found = scan([path], Target("float16", "autocast", device), load_rules())
    assert results[0].status == "ok", results[0].error  # a TemplateError would be the model's error
    return found


def keras_sample(name):
    return os.path.join(KERAS_SAMPLES, name)


def write(tmp_path, body):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def of(found, rule):
    return [f for f in found if f.rule == rule]


def test_pa501_flags_a_float16_softmax_output_layer():
    [f] = of(findings(keras_sample("pa501_output_hazard.py")), "PA501")
    assert (f.severity, f.module, f.op) == ("warning", "classifier", "softmax")
    assert f.message.startswith("the model's output comes from Dense classifier, which computes in float16 "
                                "under the mixed_float16 policy")
    assert f.fix == {"action": "keep_fp32", "module": "classifier"}  # plan: a float32 policy for the layer
    assert "{" not in f.message
    # the Keras rule replaces PA111 on a Keras model (one finding, with the layer's policy)
    assert not of(findings(keras_sample("pa501_output_hazard.py")), "PA111")


def test_pa501_clean_twin_with_a_float32_output_layer():
    assert not of(findings(keras_sample("pa501_output_clean.py")), "PA501")


def test_pa501_holds_on_cpu_where_keras_computes_the_softmax_in_float32_but_returns_float16():
    # keras/src/backend/torch/nn.py softmax upcasts float16 on CPU and casts the result back
    [f] = of(findings(keras_sample("pa501_output_hazard.py"), device="cpu"), "PA501")
    assert f.module == "classifier"


def test_pa501_follows_a_per_layer_bfloat16_policy(tmp_path):
    path = write(tmp_path, """
        import keras
        import numpy as np

        def get_model():
            x = keras.Input((16,))
            h = keras.layers.Dense(16, dtype="mixed_bfloat16", name="body")(x)
            return keras.Model(x, keras.layers.Dense(4, dtype="mixed_bfloat16", name="logits")(h))

        def get_example_inputs():
            return (np.zeros((2, 16), "float32"),)
    """)
    [f] = of(findings(path), "PA501")
    assert "Dense logits, which computes in bfloat16 under the mixed_bfloat16 policy" in f.message


def test_pa502_flags_a_cast_to_floatx_in_a_custom_layer():
    path = keras_sample("pa502_floatx_hazard.py")
    [f] = of(findings(path), "PA502")
    assert (f.module, f.line) == ("scale", 17)  # the cast in FeatureScale.call
    assert f.message == ("FeatureScale scale runs under mixed_float16, but its own code casts its float16 values "
                         "to float32, and the layer hands float32 on: its ops from there run in float32, not in "
                         "the policy's float16")


def test_pa502_clean_twin_casts_to_the_compute_dtype_and_casts_a_deliberate_upcast_back():
    assert not of(findings(keras_sample("pa502_floatx_clean.py")), "PA502")


@pytest.mark.parametrize("call", [
    # a float32 constant made with floatx() promotes the float16 input
    "return x * keras.ops.ones((x.shape[-1],), dtype=keras.backend.floatx())",
    # a variable with a hard-coded float32 dtype that the autocast scope does not cast
    "return x * self.w",
])
def test_pa502_flags_float32_that_promotes_the_layers_values(tmp_path, call):
    path = write(tmp_path, f"""
        import keras
        import numpy as np

        class Gain(keras.layers.Layer):
            def build(self, shape):
                self.w = self.add_weight(shape=(shape[-1],), initializer="ones", dtype="float32", autocast=False)

            def call(self, x):
                {call}

        def get_model():
            keras.mixed_precision.set_global_policy("mixed_float16")
            x = keras.Input((8,))
            h = Gain(name="gain")(keras.layers.Dense(8, name="hidden")(x))
            out = keras.layers.Activation("softmax", dtype="float32", name="probs")(keras.layers.Dense(4)(h))
            return keras.Model(x, out)

        def get_example_inputs():
            return (np.zeros((2, 8), "float32"),)
    """)
    [f] = of(findings(path), "PA502")
    assert f.module == "gain" and f.line == 10
    assert "promotes its float16 values to float32 in a mul with a float32 operand" in f.message


def test_pa502_leaves_keras_own_layers_and_a_float32_model_output_alone(tmp_path):
    path = write(tmp_path, """
        import keras
        import numpy as np

        class ToFloat32(keras.layers.Layer):
            def call(self, x):
                return keras.ops.cast(x, "float32")   # the model's output: what PA501 asks for

        def get_model():
            keras.mixed_precision.set_global_policy("mixed_float16")
            x = keras.Input((8, 8, 3))
            h = keras.layers.Conv2D(8, 3, name="conv")(x)
            h = keras.layers.BatchNormalization(name="bn")(h)
            h = keras.layers.LayerNormalization(name="ln")(h)
            h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
            return keras.Model(x, ToFloat32(name="to_float32")(keras.layers.Dense(4, name="logits")(h)))

        def get_example_inputs():
            return (np.zeros((2, 8, 8, 3), "float32"),)
    """)
    found = findings(path)
    assert not of(found, "PA502") and not of(found, "PA501")


def test_existing_rules_judge_the_ops_a_custom_layer_runs_in_its_policys_dtype(tmp_path):
    path = write(tmp_path, """
        import keras
        import numpy as np

        class Attend(keras.layers.Layer):
            def call(self, q, mask):
                scores = keras.ops.matmul(q, keras.ops.transpose(q, (0, 2, 1)))
                scores = keras.ops.where(mask, scores, -1e9)
                weights = keras.ops.exp(scores - keras.ops.max(scores, axis=-1, keepdims=True))
                return keras.ops.cumsum(weights, axis=-1)

        def get_model():
            keras.mixed_precision.set_global_policy("mixed_float16")
            q, mask = keras.Input((16, 32)), keras.Input((16, 16), dtype="bool")
            h = Attend(name="attend")(q, mask)
            out = keras.layers.Activation("softmax", dtype="float32", name="probs")(keras.layers.Dense(4)(h))
            return keras.Model([q, mask], out)

        def get_example_inputs():
            return ([np.zeros((2, 16, 32), "float32"), np.ones((2, 16, 16), bool)],)
    """)
    found = findings(path)
    by_rule = {f.rule: f for f in found}
    # -1e9 is -inf in float16 (PA107); cumsum carries its running sum in float16 on CUDA (PA103)
    assert {"PA107", "PA103"} <= set(by_rule), [(f.rule, f.message) for f in found]
    assert all(by_rule[r].module == "attend" for r in ("PA107", "PA103"))
    # a kernel verdict names the backend whose kernel it describes; a constant's does not
    assert by_rule["PA103"].message.endswith("(PyTorch's CUDA kernel, as Keras's torch backend runs it)")
    assert "kernel" not in by_rule["PA107"].message


def test_pa501_leaves_a_backbones_hidden_states_alone(tmp_path):
    """keras-hub's backbones end in a LayerNormalization (and BERT's in a tanh pooler): features
    a task head reads, not predictions a loss reads."""
    path = write(tmp_path, """
        import keras
        import numpy as np

        def get_model():
            keras.mixed_precision.set_global_policy("mixed_float16")
            x = keras.Input((8, 16))
            h = keras.layers.Dense(16, name="ffn")(x)
            hidden = keras.layers.LayerNormalization(name="final_norm")(h)
            pooled = keras.layers.Dense(16, activation="tanh", name="pooler")(hidden[:, 0])
            logits = keras.layers.Dense(4, name="head")(pooled)
            return keras.Model(x, {"hidden": hidden, "pooled": pooled, "logits": logits})

        def get_example_inputs():
            return (np.zeros((2, 8, 16), "float32"),)
    """)
    found = of(findings(path), "PA501")
    assert [f.module for f in found] == ["head"]
