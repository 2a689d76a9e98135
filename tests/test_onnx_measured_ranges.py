"""The value-aware audit on ONNX exports: the three PA301 cases exported with their
trained weights, calibration batches in .npz files keyed by input name. Flagged with
--data, silent without; the plan converts them so that check --data passes."""
import json
import os
import warnings

import numpy as np
import pytest

pytest.importorskip("onnxconverter_common")
import torch  # noqa: E402
from conftest import sample  # noqa: E402

from precisionaudit.runtime.pytorch.model_file import import_model_file  # noqa: E402

CASES = {  # sample stem, data function (None: the example inputs), first flagged node
    "t5_ff": ("pa301_t5_ff", None, "/block/ff/wo/MatMul"),
    "vae_decoder": ("pa301_vae_decoder", None, "/up.0/conv2/Conv"),
    "attention": ("pa301_attention", "calibration_batches", "/attn/MatMul"),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """case → (model.onnx, batches.npz): the trained model exported, its batches saved."""
    out = {}
    directory = tmp_path_factory.mktemp("onnx_ranges")
    for case, (stem, data, _) in CASES.items():
        module = import_model_file(sample(f"{stem}_hazard.py"))
        model = module.get_model().eval()
        if hasattr(module, "trained_state_dict"):
            model.load_state_dict(module.trained_state_dict())
        example = module.get_example_inputs()
        path = str(directory / f"{stem}.onnx")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(example), path, dynamo=False, input_names=["x"])
        batches = [example] if data is None else list(getattr(module, data)())
        npz = str(directory / f"{stem}.npz")
        np.savez(npz, **{f"{i}.x": b[0].numpy() for i, b in enumerate(batches)})
        out[case] = (path, npz)
    return out


def _pa301(cli, *args):
    result = cli("scan", *args, "--format", "json", "--select", "PA301")
    report = json.loads(result.stdout)
    assert report["models"][0]["status"] == "ok", report
    return result.exit_code, report["findings"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_flagged_with_npz_data_silent_without(cli, exported, case):
    path, npz = exported[case]
    code, findings = _pa301(cli, path, "--data", npz)
    assert code == 1 and findings[0]["node"] == CASES[case][2]
    assert findings[0]["evidence"]["measured"] > 65504 and findings[0]["evidence"]["first_nonfinite"]
    assert _pa301(cli, path) == (0, [])


def test_a_folder_of_npz_files_keyed_by_input_name(cli, exported, tmp_path):
    path, npz = exported["attention"]
    with np.load(npz) as data:
        for key in data.files:
            batch = key.split(".")[0]
            np.savez(tmp_path / f"batch{batch}.npz", x=data[key])
    code, findings = _pa301(cli, path, "--data", tmp_path)
    assert code == 1 and findings[0]["evidence"]["batch"] == 3  # the largest logits
    _, capped = _pa301(cli, path, "--data", tmp_path, "--batches", "1")
    assert capped[0]["evidence"]["batch"] == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_converts_it_and_check_verifies_it_on_the_data(cli, exported, case, tmp_path):
    path, npz = exported[case]
    plan = tmp_path / "plan.yaml"
    assert cli("plan", path, "--data", npz, "-o", plan).exit_code == 0
    assert CASES[case][2] in plan.read_text()
    before = cli("check", path, "--data", npz, "--format", "json")
    assert before.exit_code == 1 and json.loads(before.stdout)["variants"][1]["status"] == "nonfinite"
    after = cli("check", path, "--data", npz, "--plan", plan, "--format", "json")
    report = json.loads(after.stdout)
    assert after.exit_code == 0 and report["passed"] and report["data"] == str(npz), report
    converted = tmp_path / "model_fp16.onnx"
    assert cli("convert", path, "--plan", plan, "-o", converted).exit_code == 0 and converted.exists()


def test_prune_uses_the_data(cli, exported, tmp_path):
    path, npz = exported["t5_ff"]
    plan = tmp_path / "plan.yaml"
    assert cli("plan", path, "--data", npz, "--prune", "-o", plan).exit_code == 0
    text = plan.read_text()
    assert f"pruned on --data {npz} (1 batch" in text and "/block/ff/wo/MatMul" in text
    # on generated (standard normal) inputs the overflow does not happen: pruned away
    generated = tmp_path / "generated.yaml"
    assert cli("plan", path, "--prune", "-o", generated).exit_code == 0
    assert "/block/ff/wo/MatMul" not in generated.read_text()


def _one_line_exit_2(cli, args, expected):
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith("precisionaudit: error:") and expected in lines[0], lines[0]


def test_bad_onnx_data_is_one_line(cli, exported, tmp_path):
    path, _ = exported["t5_ff"]
    np.savez(tmp_path / "wrong.npz", input_ids=np.zeros((2, 8), np.int64))
    os.mkfifo(tmp_path / "fifo.npz")  # open() would wait for a writer
    for command in ("scan", "check"):
        _one_line_exit_2(cli, [command, path, "--data", tmp_path / "fifo.npz"], "not a regular file")
        _one_line_exit_2(cli, [command, path, "--data", tmp_path / "wrong.npz"], "are not the model's inputs")
        _one_line_exit_2(cli, [command, path, "--data", tmp_path / "d.pt"], "ONNX models take an .npz file")
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 8, 3), np.float32))
    _one_line_exit_2(cli, ["scan", path, "--data", tmp_path / "shape.npz"], "cannot run")
    _one_line_exit_2(cli, ["check", path, "--weights", tmp_path / "w.safetensors"],
                     "initializers are its weights")
