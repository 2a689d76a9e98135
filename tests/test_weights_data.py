"""--weights (safetensors file, sharded directory, weights_only state_dict; meta models
materialised by assignment) and --data (example, a function, .pt/.safetensors/.npz files):
what loads, and the bad input that must be one line and exit 2 with nothing written."""
import json
import os
import pickle

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner
from conftest import ROOT, sample
from safetensors.torch import save_file

from precisionaudit.runtime.data import pytorch_batches
from precisionaudit.runtime.pytorch.model_file import import_model_file
from precisionaudit.runtime.pytorch.source import open_source
from precisionaudit.runtime.pytorch.weights import read_state_dict
from precisionaudit.runtime.sources import DEFAULT_LOAD
from precisionaudit.cli import main
from precisionaudit.core.errors import UsageError

T5 = sample("pa301_t5_ff_hazard.py")
META = os.path.join(ROOT, "tests", "models", "meta_ff.py")


@pytest.fixture(scope="module")
def trained():
    return import_model_file(T5).trained_state_dict()


def _loaded(path, weights):
    return open_source(path).build_loaded(weights).state_dict()


def _same(a, b):
    assert sorted(a) == sorted(b)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_safetensors_file(tmp_path, trained):
    save_file(trained, tmp_path / "w.safetensors")
    _same(_loaded(T5, str(tmp_path / "w.safetensors")), trained)


def test_sharded_directory_with_index(tmp_path, trained):
    keys = sorted(trained)
    shards = {"model-00001-of-00002.safetensors": keys[:2], "model-00002-of-00002.safetensors": keys[2:]}
    for name, part in shards.items():
        save_file({k: trained[k] for k in part}, tmp_path / name)
    index = {"metadata": {}, "weight_map": {k: name for name, part in shards.items() for k in part}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    _same(_loaded(T5, str(tmp_path)), trained)


def test_state_dict_with_weights_only(tmp_path, trained):
    torch.save(trained, tmp_path / "w.pt")
    _same(_loaded(T5, str(tmp_path / "w.pt")), trained)


def test_meta_model_is_materialised_by_assignment(tmp_path):
    state = {"0.weight": torch.full((8, 4), 2.0), "0.bias": torch.zeros(8),
             "2.weight": torch.full((3, 8), 0.5), "2.bias": torch.ones(3)}
    save_file(state, tmp_path / "w.safetensors")
    model = open_source(META).build_loaded(str(tmp_path / "w.safetensors"))
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    # the checkpoint's tensors are the parameters: nothing was allocated twice
    assert model[0].weight.data_ptr() != 0 and torch.equal(model[0].weight, state["0.weight"])
    assert torch.allclose(model(torch.ones(1, 4)), torch.full((1, 3), 1.0 + 0.5 * 8 * 8.0))


@pytest.mark.parametrize("kept", ["embed.weight", "head.weight"])
def test_tied_weights_stored_once_are_tied_again(tmp_path, kept):
    """safetensors keeps one name of a tied pair, either one (save_model kept head.weight of
    bench/models/gpt_1b.py's tok/head pair)."""
    path = os.path.join(ROOT, "tests", "models", "tied_lm.py")
    model = open_source(path).build_loaded(None)
    dropped = ({"embed.weight", "head.weight"} - {kept}).pop()
    state = {k: v for k, v in model.state_dict().items() if k != dropped}
    state[kept] = torch.randn_like(state[kept])
    save_file(state, tmp_path / "w.safetensors")
    loaded = open_source(path).build_loaded(str(tmp_path / "w.safetensors"))
    assert loaded.head.weight is loaded.embed.weight
    assert torch.equal(loaded.head.weight, state[kept])


# --------------------------------------------------------------------------- data sources
def _batches(source, path=T5, limit=None):
    model = open_source(path)
    example = ((model.module.get_example_inputs()[0],), {})
    return list(pytorch_batches(source, model, example, limit))


def test_data_example_is_one_batch():
    (args, kwargs), = _batches("example")
    assert args[0].shape == (2, 8, 64) and kwargs == {}


def test_data_files_hold_one_batch_or_a_list(tmp_path):
    batches = [(torch.full((1, 3, 64), float(i)),) for i in range(3)]
    torch.save(batches, tmp_path / "list.pt")
    torch.save(batches[0], tmp_path / "one.pt")
    save_file({f"{i}.0": b[0] for i, b in enumerate(batches)}, tmp_path / "many.safetensors")
    np.savez(tmp_path / "one.npz", **{"0": batches[1][0].numpy()})
    assert [b[0][0][0, 0, 0].item() for b in _batches(str(tmp_path / "list.pt"))] == [0, 1, 2]
    assert [b[0][0][0, 0, 0].item() for b in _batches(str(tmp_path / "many.safetensors"))] == [0, 1, 2]
    assert [b[0][0][0, 0, 0].item() for b in _batches(str(tmp_path / "one.pt"))] == [0]
    assert [b[0][0][0, 0, 0].item() for b in _batches(str(tmp_path / "one.npz"))] == [1]
    assert len(_batches(str(tmp_path / "list.pt"), limit=2)) == 2


def test_a_generator_is_streamed_batch_by_batch():
    """The data function's batches are pulled one at a time: never all held at once."""
    path = sample("pa301_attention_hazard.py")
    model = open_source(path)
    module = model.module
    pulled = []

    def calibration_batches():
        for i in range(1000):
            pulled.append(i)
            yield (torch.randn(1, 2, 64),)

    module.calibration_batches = calibration_batches
    example = ((module.get_example_inputs()[0],), {})
    stream = pytorch_batches("calibration_batches", model, example, limit=3)
    next(stream)
    assert pulled == [0]
    assert len(list(stream)) == 2 and pulled == [0, 1, 2]


# --------------------------------------------------------------------------- bad input
def _pickle_with_code(path):
    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())
    with open(path, "wb") as fh:
        pickle.dump({"block.ff.wi.weight": Evil()}, fh)


def _truncated(path, trained):
    save_file(trained, path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


BAD_WEIGHTS = {
    "weights of another model": (
        lambda p, t: save_file({"encoder.weight": torch.zeros(2, 2)}, p), "w.safetensors",
        "do not fit the model (missing: block.ff.wi.weight"),
    "a shape that does not fit": (
        lambda p, t: save_file({**t, "head.weight": torch.zeros(3, 3)}, p), "w.safetensors",
        "shape mismatch: head.weight (3, 3) vs (16, 64)"),
    "a truncated safetensors": (_truncated, "w.safetensors", "not a readable safetensors file"),
    "a pickle weights_only refuses": (
        lambda p, t: _pickle_with_code(p), "w.pt", "torch.load(weights_only=True) refuses"),
    "no such weights": (lambda p, t: None, "missing.safetensors", "no such weights file"),
    # open() of a FIFO waits for a writer: it must be refused, not read
    "a FIFO": (lambda p, t: os.mkfifo(p), "w.safetensors", "not a regular file; a checkpoint is read"),
}


@pytest.mark.parametrize("case", sorted(BAD_WEIGHTS))
def test_bad_weights_are_one_line_and_nothing_is_written(case, tmp_path, trained):
    write, name, expected = BAD_WEIGHTS[case]
    weights = tmp_path / name
    write(str(weights), trained)
    plan = tmp_path / "plan.yaml"
    for args in (["scan", T5, "--weights", weights, "--data", "example"],
                 ["plan", T5, "--weights", weights, "-o", plan],
                 ["check", T5, "--weights", weights]):
        _one_line_exit_2(args, expected)
    assert not plan.exists()


BAD_DATA = {
    "wrong structure": (lambda p: torch.save([(torch.zeros(1, 2, 64), torch.zeros(2))], p), "d.pt",
                        "batch 0 does not have the structure of the example inputs"),
    "an empty batch list": (lambda p: torch.save([], p), "d.pt", "an empty batch list"),
    "a pickle weights_only refuses": (_pickle_with_code, "d.pt", "weights_only=True) cannot read"),
    "unknown function": (None, "no_such_fn", "no function no_such_fn()"),
    "unknown format": (lambda p: open(p, "w").write("x"), "d.csv", "unknown data format"),
    "a FIFO": (os.mkfifo, "d.pt", "not a regular file; a calibration file is read"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_bad_data_is_one_line_and_nothing_is_written(case, tmp_path):
    write, name, expected = BAD_DATA[case]
    data = name
    if write is not None:
        data = str(tmp_path / name)
        write(data)
    plan = tmp_path / "plan.yaml"
    for args in (["scan", T5, "--data", data], ["plan", T5, "--data", data, "-o", plan],
                 ["check", T5, "--data", data]):
        _one_line_exit_2(args, expected)
    assert not plan.exists()


def test_batches_needs_data():
    _one_line_exit_2(["scan", T5, "--batches", "2"], "--batches needs --data")


def test_pytorch_prune_refuses_data_it_would_not_run_on(tmp_path):
    """A model file's plan is pruned on its example inputs: with a data file that would drop
    entries only the data needs, so it is refused before anything runs."""
    batches = tmp_path / "batches.pt"
    torch.save([import_model_file(T5).get_example_inputs()], batches)
    plan = tmp_path / "plan.yaml"
    _one_line_exit_2(["plan", T5, "--data", str(batches), "--prune", "-o", str(plan)],
                     "plan --prune --data FILE is for ONNX models")
    assert not plan.exists()


def test_pytorch_prune_takes_the_example_inputs_as_data(tmp_path):
    """--data example measures on the inputs the pruning runs use: the measured plan is pruned
    and verified (the overflowing mul's region stays, found by PA301 from the data)."""
    plan = tmp_path / "plan.yaml"
    result = CliRunner().invoke(main, ["plan", sample("check_exp_overflow.py"), "--mode", "pure", "--data", "example", "--prune",
                                       "-o", str(plan)])
    assert result.exit_code == 0, result.output
    written = yaml.safe_load(plan.read_text())
    assert [(o["module"], o["ops"]) for o in written["overrides"]] == [("gate", ["exp"])]
    assert "this plan's check run passed" in plan.read_text()


def test_read_state_dict_refuses_a_non_state_dict(tmp_path):
    torch.save([torch.zeros(2)], tmp_path / "w.pt")
    with pytest.raises(UsageError, match="not a state_dict"):
        read_state_dict(str(tmp_path / "w.pt"))


def _one_line_exit_2(args, expected):
    result = CliRunner().invoke(main, [str(a) for a in args])
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines)) == (2, 1), (args, result.stderr, result.stdout)
    assert lines[0].startswith("precisionaudit: error:") and expected in lines[0], lines[0]
    assert result.stdout == "" and "Traceback" not in result.stderr


EXITING = '''
import sys
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        if x.abs().max() > 100:
            {action}
        return self.l(x)


def get_model():
    return M()


def get_example_inputs():
    return (torch.zeros(2, 4),)


def big():
    return [(torch.full((2, 4), 1000.0),)]
'''


@pytest.mark.parametrize("action,expected", [
    ("sys.exit(0)", "forward called sys.exit(0)"),
    ("raise ValueError('too big')", "the fp32 forward on calibration batch 0 failed: ValueError: too big"),
])
def test_a_forward_that_exits_or_raises_on_the_data_is_one_line(tmp_path, action, expected):
    path = tmp_path / "exiting.py"
    path.write_text(EXITING.replace("{action}", action))
    _one_line_exit_2(["scan", path, "--data", "big"], expected)


def test_a_checkpoint_larger_than_half_the_free_memory_is_offloaded(tmp_path, trained, monkeypatch):
    """accelerate dispatches it (CPU budget, then disk) and the range pass still sees the
    overflow, with the same measured value as with the model in memory."""
    pytest.importorskip("accelerate")
    from precisionaudit.capture.pytorch import calibration, offload
    from precisionaudit.core.numerics import Target
    from precisionaudit.core.values import ValueOptions

    weights = str(tmp_path / "w.safetensors")
    save_file(trained, weights)
    values = ValueOptions(weights=weights, data="example")
    target = Target("float16", "autocast", "cuda")
    in_memory = calibration.measure_file(T5, target, DEFAULT_LOAD, values)
    size = os.path.getsize(weights)
    monkeypatch.setattr(offload, "available_memory", lambda: int(1.98 * size))  # file > half of it
    dispatched = []
    import accelerate

    real = accelerate.load_checkpoint_and_dispatch

    def spy(model, checkpoint, **kwargs):
        model = real(model, checkpoint, **kwargs)
        dispatched.append(set(model.hf_device_map.values()))
        return model

    monkeypatch.setattr(accelerate, "load_checkpoint_and_dispatch", spy)
    offloaded = calibration.measure_file(T5, target, DEFAULT_LOAD, values)
    assert dispatched and "disk" in dispatched[0], dispatched
    key = "block.ff.wo|linear|0"
    assert offloaded.calls[key]["max_abs"] == pytest.approx(in_memory.calls[key]["max_abs"], rel=1e-6)
    assert offloaded.calls[key]["max_abs"] > 65504 and offloaded.first_nonfinite
    assert offloaded.weights["block.ff.wo.weight"] == in_memory.weights["block.ff.wo.weight"]


def test_an_offloaded_model_keeps_its_tied_weights_tied(tmp_path):
    """init_empty_weights unties head.weight = embed.weight; the offload path ties them
    again, so a checkpoint that stores them once fits (the 13 GB bench checkpoint did not)."""
    pytest.importorskip("accelerate")
    from precisionaudit.capture.pytorch.offload import load_offloaded

    path = os.path.join(ROOT, "tests", "models", "tied_lm.py")
    state = {"embed.weight": torch.randn(32, 16)}
    save_file(state, tmp_path / "w.safetensors")
    model = load_offloaded(open_source(path), str(tmp_path / "w.safetensors"), budget=1 << 30)
    ids = torch.randint(0, 32, (2, 5))
    assert torch.allclose(model(ids), state["embed.weight"][ids] @ state["embed.weight"].T, atol=1e-5)
