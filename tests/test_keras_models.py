"""Keras 3 model files: captured on Keras's torch backend under the model's own dtype policies."""
import os
import subprocess
import sys
import textwrap

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")  # as precisionaudit selects it; keras reads it once
pytest.importorskip("keras")

from conftest import ROOT  # noqa: E402

from precisionaudit.core.numerics import Target  # noqa: E402
from precisionaudit.scanner import scan  # noqa: E402

CLASSIFIER = os.path.join(ROOT, "samples", "keras", "keras_mixed_classifier.py")


def write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def scanned(path, device="cuda", dtype="float16"):
    results, _ = scan([path], Target(dtype, "autocast", device), [])
    assert results[0].status == "ok", results[0].error
    return results[0]


def nodes(result, op):
    return [a for _, a in result.graph.nodes(data=True) if a["op"] == op]


def test_mixed_float16_is_judged_in_the_dtypes_the_policy_computes_in_on_cuda():
    result = scanned(CLASSIFIER)
    assert result.frontend == "fake"
    assert result.target == {"dtype": "float16", "mode": "pure", "device": "cuda"}
    # Keras's torch backend on CUDA: the Dense matmuls (projections: linear, kernel as
    # torch's (out, in)) and the softmax run in float16 ...
    assert [(a["module"], a["compute_dtype"], a["params"]) for a in nodes(result, "linear")] == [
        ("dense", "float16", [["dense/kernel", (64, 64)]]), ("dense_1", "float16", [["dense_1/kernel", (8, 64)]])]
    [softmax] = nodes(result, "softmax")
    assert (softmax["module"], softmax["compute_dtype"], softmax["out_dtype"]) == ("dense_1", "float16", "float16")
    # ... and the variables stay float32 until the layer casts them (mixed policy)
    kernel_casts = [a for a in nodes(result, "to") if a["params"]]
    assert {a["params"][0][0] for a in kernel_casts} >= {"dense/kernel", "dense_1/kernel"}
    assert all(a["in_dtypes"] == ["float32"] and a["out_dtype"] == "float16" for a in kernel_casts)
    assert result.graph.graph["keras_layers"]["dense_1"]["policy"] == "mixed_float16"


def test_device_cpu_captures_keras_cpu_paths_where_float16_matmul_runs_in_float32():
    # keras/src/backend/torch/numpy.py matmul: "torch.matmul doesn't support float16 with cpu"
    result = scanned(CLASSIFIER, device="cpu")
    assert [a["compute_dtype"] for a in nodes(result, "linear")] == ["float32", "float32"]
    assert nodes(result, "softmax")[0]["compute_dtype"] == "float32"


def test_mixed_bfloat16_policy_sets_the_judged_dtype(tmp_path):
    path = write(tmp_path, "bf16.py", """
        import keras
        import numpy as np

        def get_model():
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
            x = keras.Input((16,))
            return keras.Model(x, keras.layers.Dense(4, activation="softmax")(x))

        def get_example_inputs():
            return (np.zeros((2, 16), "float32"),)
    """)
    result = scanned(path, dtype="float16")
    assert result.target["dtype"] == "bfloat16"
    assert nodes(result, "softmax")[0]["compute_dtype"] == "bfloat16"


def test_per_layer_policy_is_what_the_layer_computes_in(tmp_path):
    path = write(tmp_path, "per_layer.py", """
        import keras
        import numpy as np

        def get_model():
            x = keras.Input((16,))
            h = keras.layers.Dense(8, dtype="mixed_float16", name="body")(x)
            return keras.Model(x, keras.layers.Activation("softmax", dtype="float32", name="head")(h))

        def get_example_inputs():
            return (np.zeros((2, 16), "float32"),)
    """)
    result = scanned(path)
    assert nodes(result, "linear")[0]["compute_dtype"] == "float16"
    [softmax] = nodes(result, "softmax")
    assert (softmax["module"], softmax["compute_dtype"]) == ("head", "float32")
    layers = result.graph.graph["keras_layers"]
    assert (layers["body"]["policy"], layers["head"]["policy"]) == ("mixed_float16", "float32")


def test_global_policy_set_by_a_model_file_is_put_back():
    import keras

    before = keras.config.dtype_policy().name
    scanned(CLASSIFIER)
    assert keras.config.dtype_policy().name == before == "float32"


def test_explain_shows_each_ops_keras_layer_and_policy(cli):
    result = cli("explain", CLASSIFIER)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("node "))
    assert header.split()[:4] == ["node", "op", "module", "policy"]
    softmax = next(line.split() for line in lines if line.startswith("softmax "))
    assert softmax[:4] == ["softmax", "softmax", "dense_1", "mixed_float16"]
    assert any("torch backend" in line and "not TensorFlow's or XLA's" in line for line in lines)


def test_a_model_file_that_insists_on_another_backend_is_one_line_and_exit_2(tmp_path, cli):
    path = write(tmp_path, "jax_model.py", """
        import os
        os.environ["KERAS_BACKEND"] = "jax"
        import keras

        def get_model():
            x = keras.Input((4,))
            return keras.Model(x, keras.layers.Dense(2)(x))

        def get_example_inputs():
            return ()
    """)
    result = cli("scan", path)
    assert result.exit_code == 2
    assert "asks for the jax backend" in result.output and "torch backend" in result.output
    assert os.environ["KERAS_BACKEND"] == "torch"


def test_a_factory_that_returns_no_keras_model_is_exit_2(tmp_path, cli):
    path = write(tmp_path, "not_model.py", """
        import keras

        def get_model():
            return 42

        def get_example_inputs():
            return ()
    """)
    result = cli("scan", path)
    assert result.exit_code == 2
    assert "get_model() returned int, not a keras.Model" in result.output


def test_scanning_pytorch_and_onnx_models_does_not_import_keras():
    code = textwrap.dedent(f"""
        import sys
        from precisionaudit.core.numerics import Target
        from precisionaudit.rules.engine import load_rules
        from precisionaudit.scanner import scan
        results, _ = scan([{os.path.join(ROOT, "sample_models", "pa107_mask_hazard.py")!r}], Target(), load_rules())
        assert results[0].status == "ok", results[0].error
        print("keras" in sys.modules)
    """)
    env = {**os.environ, "PRECISIONAUDIT_NO_FORK": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("precisionaudit: error:") or ": error" in line]
    assert "Traceback" not in result.output
    return "\n".join(errors or lines)


def test_a_keras_archive_is_scanned_with_inputs_shaped_like_the_models(tmp_path, cli):
    import keras

    from precisionaudit.capture.keras.backend import import_keras  # noqa: F401 - the torch backend

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        x = keras.Input((12,))
        model = keras.Model(x, keras.layers.Dense(3, activation="softmax", name="head")(x))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    path = tmp_path / "model.keras"
    model.save(path)
    result = cli("scan", path, "--format", "json", "--exit-zero")
    assert result.exit_code == 0, result.output
    import json

    report = json.loads(result.output)
    assert report["models"][0]["status"] == "ok"
    # (and PA204 info: a 12x3 Dense is too small for Tensor Cores)
    assert [(f["rule"], f["module"]) for f in report["findings"] if f["severity"] != "info"] == [("PA501", "head")]


def test_a_keras_file_that_is_not_a_zip_is_one_line_and_exit_2(tmp_path, cli):
    path = tmp_path / "broken.keras"
    path.write_text("not a zip")
    assert "not a Keras archive (a .keras file is a zip archive; this one is not)" in one_error_line(cli("scan", path))


def test_a_keras_archive_written_by_a_newer_keras_is_one_line_and_exit_2(tmp_path, cli):
    import zipfile

    path = tmp_path / "future.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", '{"keras_version": "99.0.0"}')
        archive.writestr("config.json", "{}")
    assert "written by Keras 99.0.0, newer than the installed Keras" in one_error_line(cli("scan", path))


def test_an_op_the_torch_backend_cannot_run_is_named_with_the_onnx_route(tmp_path, cli):
    path = write(tmp_path, "sync_moments.py", """
        import keras
        import numpy as np

        class SyncStats(keras.layers.Layer):
            def call(self, x):
                mean, var = keras.ops.moments(x, axes=[0], synchronized=True)
                return (x - mean) / keras.ops.sqrt(var + 1e-3)

        def get_model():
            x = keras.Input((4,))
            return keras.Model(x, SyncStats()(x))

        def get_example_inputs():
            return (np.ones((2, 4), "float32"),)
    """)
    line = one_error_line(cli("scan", path))
    assert "the model calls keras.ops.moments, which Keras's torch backend cannot run" in line
    assert "exported to ONNX with tf2onnx and scanned as an .onnx file" in line


def test_a_model_file_that_needs_tensorflow_gets_the_onnx_route(tmp_path, cli):
    import importlib.util

    if importlib.util.find_spec("tensorflow") is not None:
        pytest.skip("TensorFlow is installed here")
    path = write(tmp_path, "tf_model.py", """
        import tensorflow as tf

        def get_model():
            return tf.keras.Sequential()

        def get_example_inputs():
            return ()
    """)
    line = one_error_line(cli("scan", path))
    assert "imports TensorFlow" in line and "tf2onnx" in line


@pytest.mark.parametrize("source,keras_file", [
    ("import keras\n", True),
    ("from keras import layers\n", True),
    ("import tensorflow as tf\nmodel = tf.keras.Sequential()\n", True),
    ("from tensorflow import keras\n", True),
    # a PyTorch model file that imports TensorFlow for something else stays a PyTorch file
    ("import torch\nimport tensorflow as tf\nwriter = tf.summary.create_file_writer('x')\n", False),
    ("import torch\n# keras is not imported here\n", False),
])
def test_which_python_files_are_keras_model_files(tmp_path, source, keras_file):
    from precisionaudit.frontend import frontend_for

    path = tmp_path / "model.py"
    path.write_text(source + "def get_model():\n    pass\n")
    assert (frontend_for(str(path)).name == "keras") is keras_file


def test_a_float16_policy_keeps_float16_variables_and_is_judged_in_float16(tmp_path, cli):
    path = write(tmp_path, "pure_fp16.py", """
        import keras
        import numpy as np

        def get_model():
            x = keras.Input((16,))
            return keras.Model(x, keras.layers.Dense(8, dtype="float16", name="body")(x))

        def get_example_inputs():
            return (np.zeros((2, 16), "float32"),)
    """)
    result = scanned(path)
    [linear] = nodes(result, "linear")
    assert linear["compute_dtype"] == "float16" and linear["params"] == [["body/kernel", (8, 16)]]
    assert result.graph.graph["keras_layers"]["body"]["variable_dtype"] == "float16"
    # no float32 reference with the same weights: check says so in one line
    assert "keeps float16/bfloat16 variables" in one_error_line(cli("check", path))
