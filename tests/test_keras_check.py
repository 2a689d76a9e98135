"""plan and check for Keras models: the plan lists the layers to give a float32 policy, and
check compares float32, the model's policies, and the policies with the plan."""
import json
import os

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")  # as precisionaudit selects it; keras reads it once
pytest.importorskip("keras")

from conftest import ROOT  # noqa: E402

import precisionaudit  # noqa: E402
from precisionaudit.plan.file import load_plan  # noqa: E402

CLASSIFIER = os.path.join(ROOT, "samples", "keras", "check_text_classifier.py")


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    from click.testing import CliRunner

    from precisionaudit.cli import main

    path = tmp_path_factory.mktemp("keras_plan") / "amp_plan.yaml"
    result = CliRunner().invoke(main, ["plan", CLASSIFIER, "-o", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return path


def test_the_plan_lists_the_layers_whose_float16_breaks_the_log_probabilities(plan_file):
    plan = load_plan(str(plan_file))
    assert plan.target == {"dtype": "float16", "mode": "pure", "device": "cuda"}
    entries = {o.module: set(o.rules) for o in plan.overrides}
    # the softmax whose float16 probabilities are logged (PA101), the log layer (PA105) that
    # is also the model's output layer (PA501)
    assert entries == {"probs": {"PA101"}, "log_probs": {"PA105", "PA501"}}
    text = plan_file.read_text()
    assert "precisionaudit.apply_keras_plan(model" in text and "check it: precisionaudit check" in text


def test_the_float16_softmax_output_breaks_check_and_the_plan_fixes_it(plan_file, cli):
    baseline = cli("check", CLASSIFIER, "--format", "json")
    assert baseline.exit_code == 1, baseline.output
    report = json.loads(baseline.output)
    [variant] = [v for v in report["variants"] if v["name"] == "baseline"]
    assert variant["status"] == "nonfinite" and variant["outputs"][0]["nonfinite"] > 0
    planned = cli("check", CLASSIFIER, "--plan", plan_file, "--format", "json")
    assert planned.exit_code == 0, planned.output
    report = json.loads(planned.output)
    assert [v["status"] for v in report["variants"]] == ["ok", "nonfinite", "ok"]
    assert report["variants"][-1]["plan"]["layers"] == ["log_probs", "probs"]
    assert report["passed"] is True


def test_apply_keras_plan_gives_the_layers_float32_and_restore_gives_their_policies_back(plan_file):
    import keras
    import numpy as np

    from precisionaudit.runtime.pytorch.model_file import import_model_file

    module = import_model_file(CLASSIFIER)
    try:
        model = module.get_model()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    tokens = module.get_example_inputs()[0]
    assert not np.isfinite(keras.ops.convert_to_numpy(model(tokens))).all()  # CPU paths: -inf too
    handle = precisionaudit.apply_keras_plan(model, str(plan_file))
    assert {path: model.get_layer(path).dtype_policy.name for path in handle.layers} == {
        "probs": "float32", "log_probs": "float32"}
    assert model.get_layer("hidden").dtype_policy.name == "mixed_float16"
    assert np.isfinite(keras.ops.convert_to_numpy(model(tokens))).all()
    handle.restore()
    assert model.get_layer("probs").dtype_policy.name == "mixed_float16"


def test_plan_prune_is_refused_for_keras_models_in_one_line(cli):
    result = cli("plan", CLASSIFIER, "--prune", "-o", "-")
    assert result.exit_code == 2
    assert "plan --prune does not take Keras models yet" in result.output
