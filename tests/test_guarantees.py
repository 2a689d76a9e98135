"""The guarantees of issue 11, one named test per defect: no bad input, model code or
signal can corrupt a user's file, hang the tool or forge its verdict."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from conftest import ROOT, sample

from precisionaudit.cli import main

HAZARD = sample("pa101_softmax_hazard.py")
CLEAN = sample("pa111_output_clean.py")


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        result.exception
    return result


def one_error_line(result, expected, code=2):
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert lines and lines[-1].startswith("precisionaudit: error:") and expected in lines[-1], lines
    assert "Traceback" not in result.stderr


def digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.fixture
def model(tmp_path):
    return shutil.copy(HAZARD, tmp_path / "m.py")


def write_model(tmp_path, body, name="m.py"):
    path = tmp_path / name
    path.write_text("import sys\nimport torch\n" + textwrap.dedent(body))
    return path


# --------------------------------------------------------------------------- 1. data loss
@pytest.mark.parametrize("args", [["plan", "{m}", "-o", "{m}"], ["scan", "{m}", "--write-baseline", "{m}"]],
                         ids=["plan -o model", "scan --write-baseline model"])
def test_an_output_that_is_an_input_is_refused(model, args):
    before = digest(model)
    result = run(*[a.format(m=model) for a in args])
    one_error_line(result, "which this command reads")
    assert digest(model) == before


def test_an_output_through_a_symlink_or_hard_link_to_the_model_is_refused(model, tmp_path):
    os.symlink(model, tmp_path / "link.yaml")
    os.link(model, tmp_path / "hard.yaml")
    before = digest(model)
    for name in ("link.yaml", "hard.yaml"):
        one_error_line(run("plan", model, "-o", tmp_path / name), "which this command reads")
    assert digest(model) == before and os.path.islink(tmp_path / "link.yaml")


@pytest.mark.parametrize("kind", ["device", "symlink to device", "fifo", "directory"])
def test_a_non_regular_output_is_refused(model, tmp_path, kind):
    target = tmp_path / "out"
    if kind == "device":
        target = "/dev/null"
    elif kind == "symlink to device":
        os.symlink("/dev/null", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    for args in (["plan", model, "-o", target], ["scan", model, "--write-baseline", target]):
        one_error_line(run(*args), "directory" if kind == "directory" else "not a regular file")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    if kind == "symlink to device":
        assert os.readlink(target) == "/dev/null"


def test_the_baseline_named_in_the_settings_can_be_rewritten(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.precisionaudit]\nbaseline = "base.json"\n')
    (tmp_path / "base.json").write_text("{}")
    result = run("scan", model, "--write-baseline", "base.json")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "base.json").read_text())["tool"] == "precisionaudit"
    one_error_line(run("scan", model, "--write-baseline", "pyproject.toml"), "which this command reads")


def test_an_output_into_a_missing_folder_is_one_line(model, tmp_path):
    one_error_line(run("plan", model, "-o", tmp_path / "nope" / "plan.yaml"), "does not exist")


@pytest.mark.parametrize("where", ["missing folder", "read-only folder", "onto a folder"])
def test_convert_output_into_a_missing_or_read_only_folder_or_onto_a_folder_is_one_line(tmp_path, monkeypatch,
                                                                                         where):
    from onnx_graphs import exp_softmax_by_hand

    from precisionaudit.core import outputs

    gate = exp_softmax_by_hand(tmp_path)
    target, expected = tmp_path / "nope" / "out.onnx", "nope does not exist"
    if where == "read-only folder":  # os.access, not chmod: root may write anywhere
        target, expected = tmp_path / "out.onnx", "is not writable"
        monkeypatch.setattr(outputs.os, "access", lambda path, mode: False)
    elif where == "onto a folder":
        target, expected = tmp_path, "is a directory"
    one_error_line(run("convert", gate, "-o", target), expected)
    assert sorted(os.listdir(tmp_path)) == ["gate.onnx"]


def test_a_plan_written_through_a_symlink_keeps_the_link(model, tmp_path):
    (tmp_path / "real.yaml").write_text("old")
    os.symlink(tmp_path / "real.yaml", tmp_path / "plan.yaml")
    result = run("plan", model, "-o", tmp_path / "plan.yaml")
    assert result.exit_code == 0, result.stderr
    assert os.path.islink(tmp_path / "plan.yaml") and "overrides" in (tmp_path / "real.yaml").read_text()


# --------------------------------------------------------------------------- 2. forged verdicts
EXITS = {
    "sys.exit(0) in get_model": ("def get_model():\n    sys.exit(0)\n", "get_model() called sys.exit(0)"),
    "sys.exit(3) in get_model": ("def get_model():\n    sys.exit(3)\n", "get_model() called sys.exit(3)"),
    "SystemExit('x') in inputs": (("def get_model():\n    return torch.nn.Linear(4, 4)\n"
                                   "def get_example_inputs():\n    raise SystemExit('x')\n"),
                                  "get_example_inputs() called sys.exit('x')"),
    "KeyboardInterrupt in get_model": ("def get_model():\n    raise KeyboardInterrupt\n",
                                       "get_model() raised KeyboardInterrupt"),
    "BaseException subclass in forward": (
        ("class Boom(BaseException):\n    pass\n"
         "class M(torch.nn.Module):\n    def forward(self, x):\n        raise Boom('bang')\n"
         "def get_model():\n    return M()\n"
         "def get_example_inputs():\n    return (torch.randn(2, 4),)\n"), "forward raised Boom: bang"),
    "sys.exit at import": ("sys.exit(0)\ndef get_model():\n    return torch.nn.Linear(4, 4)\n",
                           "importing the model file called sys.exit(0)"),
}


@pytest.mark.parametrize("case", sorted(EXITS))
def test_model_code_cannot_forge_the_exit_code(tmp_path, case):
    body, expected = EXITS[case]
    path = write_model(tmp_path, body)
    one_error_line(run("scan", path), expected)


@pytest.mark.parametrize("case", ["sys.exit(0) in get_model", "BaseException subclass in forward"])
def test_check_cannot_be_forged_either(tmp_path, case):
    body, expected = EXITS[case]
    if "get_example_inputs" not in body:
        body += "def get_example_inputs():\n    return (torch.randn(2, 4),)\n"
    one_error_line(run("check", write_model(tmp_path, body)), expected)


def test_ctrl_c_in_the_python_api_stays_a_keyboard_interrupt():
    from precisionaudit.runtime.pytorch.user_code import user_code

    # outside the command line it may be the user's Ctrl-C
    with pytest.raises(KeyboardInterrupt), user_code("m.py", "get_model()"):
        raise KeyboardInterrupt


PRINTING = """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
    def forward(self, x):
        print("forward says hi")
        return torch.softmax(self.lin(x), -1)
print("import says hi")
def get_model():
    print("get_model says hi")
    return M()
def get_example_inputs():
    print("inputs say hi")
    return (torch.randn(2, 8),)
"""


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_printing_model_keeps_the_report_valid(tmp_path, fmt):
    path = write_model(tmp_path, PRINTING)
    result = run("scan", path, "--format", fmt)
    json.loads(result.stdout)
    assert "says hi" in result.stderr


def test_a_printing_model_keeps_the_check_report_valid(tmp_path):
    path = write_model(tmp_path, PRINTING)
    result = run("check", path, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    assert json.loads(result.stdout)["variants"]


# --------------------------------------------------------------------------- 3. one bad model
def test_one_failing_model_does_not_hide_the_others(tmp_path):
    bad = write_model(tmp_path, EXITS["sys.exit(0) in get_model"][0], "bad.py")
    result = run("scan", bad, CLEAN, "--format", "json")
    report = json.loads(result.stdout)
    assert [m["status"] for m in report["models"]] == ["error", "ok"]
    assert result.exit_code == 2


def test_an_internal_error_is_that_models_error_and_says_report(monkeypatch, tmp_path):
    from precisionaudit.rules import engine

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(engine, "run_rules", broken)
    result = run("scan", CLEAN, "--format", "json")
    assert result.exit_code == 2
    assert "internal error, please report: ZeroDivisionError" in result.stderr
    assert "Traceback" not in result.stderr and "--debug" in result.stderr
    debug = run("scan", CLEAN, "--debug")
    assert "Traceback" in debug.stderr


SETS_DEFAULTS = """
    from torch import nn
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)

    def get_model():
        return nn.Linear(8, 8)

    def get_example_inputs():
        return (torch.randn(2, 8),)
"""


def test_a_model_that_changes_torch_defaults_does_not_change_the_next_ones_scan(tmp_path):
    import torch

    from precisionaudit.core.numerics import Target
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.scanner import scan

    first = write_model(tmp_path, SETS_DEFAULTS, "a_sets_defaults.py")
    results, _ = scan([str(first), CLEAN], Target("float16", "autocast", "cuda"), load_rules())
    first_ops = [n for _, n in results[0].graph.nodes(data=True) if n["op"] == "linear"]
    assert first_ops[0]["in_dtypes"][0] == "float64"  # its own scan ran under its defaults
    later = [n for _, n in results[1].graph.nodes(data=True) if n["op"] == "linear"]
    assert later and all(n["in_dtypes"][0] == "float32" and n["out_dtype"] == "float16" for n in later)
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()


def test_a_bare_torch_module_as_model_is_located_at_its_file_not_at_our_caller(tmp_path):
    """The stack above nn.Linear's forward is torch, then precisionaudit, then click: no
    frame of it is the model's (a finding once pointed at click/core.py)."""
    path = write_model(tmp_path, "from torch import nn\n\ndef get_model():\n    return nn.Linear(8, 8)\n\n"
                       "def get_example_inputs():\n    return (torch.randn(2, 8),)\n")
    report = json.loads(run("scan", path, "--mode", "pure", "--format", "json").stdout)
    assert report["findings"] and {(f["path"], f["line"]) for f in report["findings"]} == {(str(path), None)}
    assert "click" not in json.dumps(report["findings"])



LEAVES_STATE = """
    from torch import nn
    from torch.overrides import TorchFunctionMode

    class Refuses(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            raise RuntimeError("a mode the model left behind")

    def get_model():
        torch.set_autocast_enabled("cpu", True)
        torch.set_default_device("meta")
        Refuses().__enter__()  # what a forward stopped inside `with mode:` by --timeout leaves
        return nn.Linear(8, 8)
"""


def test_a_mode_or_autocast_left_entered_does_not_change_the_next_ones_scan(tmp_path):
    import torch
    from torch.utils._python_dispatch import _len_torch_dispatch_stack

    from precisionaudit.core.numerics import Target
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.scanner import scan

    first = write_model(tmp_path, LEAVES_STATE, "a_leaves_state.py")
    results, _ = scan([str(first), CLEAN], Target("float16", "autocast", "cuda"), load_rules())
    assert [r.status for r in results] == ["error", "ok"]
    assert (torch._C._len_torch_function_stack(), _len_torch_dispatch_stack()) == (0, 0)
    assert not torch.is_autocast_enabled("cpu") and torch.get_default_device().type == "cpu"

# --------------------------------------------------------------------------- 4. hangs
LOOP = """
class M(torch.nn.Module):
    def forward(self, x):
        while True:
            try:
                x = x + 0
            except Exception:
                pass
def get_model():
    return M()
def get_example_inputs():
    return (torch.randn(2, 4),)
"""


def test_timeout_stops_an_endless_forward_and_reports_the_others(tmp_path):
    path = write_model(tmp_path, LOOP, "loop.py")
    assert run("scan", CLEAN).exit_code == 0  # torch's lazy imports, done: 3 s is the model's own time
    result = run("scan", path, CLEAN, "--timeout", "3", "--format", "json")
    report = json.loads(result.stdout)
    assert [m["status"] for m in report["models"]] == ["error", "ok"]
    assert "timed out after 3 s (--timeout)" in result.stderr and result.exit_code == 2


def test_timeout_stops_an_endless_check(tmp_path):
    path = write_model(tmp_path, LOOP, "loop.py")
    assert run("check", CLEAN, "--device", "cpu").exit_code == 0  # the check's lazy imports, done first
    one_error_line(run("check", path, "--timeout", "3"), "timed out after 3 s")


# Python drops an exception raised in a gc callback or a finalizer ("Exception ignored in"),
# and a model may catch it: the time limit came once and was lost, and the check ran forever
# (hypothesis's gc callback, installed by the suite's fuzz tests, made CI hang).
LOST_IN_GC_CALLBACK = """
import gc
def spin_once(phase, info, spun=[]):
    if not spun:  # the alarm is handled here, where Python drops what is raised
        spun.append(True)
        while True:
            pass
class M(torch.nn.Module):
    def forward(self, x):
        gc.callbacks.append(spin_once)
        gc.collect()
        while True:
            x = x + 0
"""
LOST_IN_FINALIZER = """
class Spins:
    spun = False
    def __del__(self):
        if not Spins.spun:
            Spins.spun = True
            open(__file__ + ".spinning", "w").close()
            while True:
                pass
class M(torch.nn.Module):
    def forward(self, x):
        while True:
            Spins()
            x = x + 0
"""
CAUGHT_BY_THE_MODEL = """
class M(torch.nn.Module):
    def forward(self, x):
        try:
            while True:
                x = x + 0
        except BaseException:
            pass
        while True:
            x = x + 0
"""
ENTRIES = """
def get_model():
    return M()
def get_example_inputs():
    return (torch.randn(2, 4),)
"""


@pytest.mark.parametrize("body", [LOST_IN_GC_CALLBACK, LOST_IN_FINALIZER, CAUGHT_BY_THE_MODEL],
                         ids=["in a gc callback", "in a finalizer", "caught by the model"])
def test_a_time_limit_lost_once_comes_again(tmp_path, body):
    path = write_model(tmp_path, body + ENTRIES)
    proc = subprocess.run([sys.executable, "-m", "precisionaudit", "check", str(path), "--timeout", "2"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    one_error_line(SimpleNamespace(stderr=proc.stderr, exit_code=proc.returncode), "timed out after 2 s")
    assert "Exception ignored" not in proc.stderr


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["Ctrl-C", "SIGTERM", "SIGHUP"])
def test_a_signal_dropped_in_a_finalizer_comes_again(tmp_path, sig, code):
    import time

    path = write_model(tmp_path, LOST_IN_FINALIZER + ENTRIES)
    proc = subprocess.Popen([sys.executable, "-m", "precisionaudit", "check", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        started = time.monotonic()
        while not os.path.exists(f"{path}.spinning") and time.monotonic() - started < 60:
            time.sleep(0.05)
        proc.send_signal(sig)  # handled in the finalizer, where Python drops it
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Exception ignored" not in err and "Traceback" not in err


def test_a_fifo_as_baseline_is_refused_without_blocking(tmp_path):
    """open() of a FIFO waits for a writer: scan --baseline FIFO hung (found by hand after
    the fuzz suite; tests/fuzz_cases.py now draws it)."""
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    one_error_line(run("scan", HAZARD, "--baseline", fifo), "not a regular file; a baseline is read")
    (tmp_path / "precisionaudit.toml").write_text('baseline = "base.json"\n')
    one_error_line(run("scan", HAZARD, "--config", tmp_path / "precisionaudit.toml"), "not a regular file")


@pytest.mark.parametrize("command,option", [("scan", "--config"), ("check", "--config"), ("check", "--plan")])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_settings_file_or_plan_that_is_a_fifo_or_device_says_so(tmp_path, command, option, kind):
    target = "/dev/zero" if kind == "device" else tmp_path / "doc"
    if kind == "fifo":
        os.mkfifo(target)
    one_error_line(run(command, HAZARD, option, target), "not a regular file")


def test_scanning_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "m.py"
    os.mkfifo(fifo)
    one_error_line(run("scan", fifo), "not a regular file")
    shutil.copy(CLEAN, tmp_path / "real.py")
    assert run("scan", tmp_path).exit_code == 0  # a directory's FIFOs are skipped


def test_a_plan_with_many_double_stars_does_not_hang_check(tmp_path):
    """``matches`` is linear (tests/test_globs.py); this is the command the issue saw hang."""
    import time

    plan = tmp_path / "plan.yaml"
    plan.write_text("version: 1\ntarget: {dtype: float16, mode: pure}\noverrides:\n"
                    f"- {{module: '{'.'.join(['**'] * 24)}.x', dtype: float32}}\n")
    started = time.perf_counter()
    result = run("check", HAZARD, "--mode", "pure", "--plan", plan, "--timeout", "120")
    assert result.exit_code in (0, 1, 2) and "timed out" not in result.stderr, result.stderr
    assert time.perf_counter() - started < 120


# --------------------------------------------------------------------------- 5. clear lines
@pytest.mark.parametrize("args,expected", [
    (["check", HAZARD, "--cosine", "nan"], "--cosine nan"),
    (["check", HAZARD, "--atol", "-1"], "--atol -1"),
    (["check", HAZARD, "--rtol", "inf"], "--rtol inf"),
    (["check", HAZARD, "--seed", str(2**80)], "--seed"),
    (["scan", "--no-such-flag", HAZARD], "No such option"),
    (["scan"], "Missing argument"),
    (["scan", HAZARD, "--format", "xml"], "Invalid value for '--format'"),
    (["scan", HAZARD, "--timeout", "-1"], "--timeout"),
    (["explain", HAZARD, "--timeout", "nan"], "--timeout': 'nan' is not a finite number"),
    (["scan", HAZARD, "--data", "example", "--headroom", "nan"], "--headroom': 'nan' is not a finite number"),
    (["scan", HAZARD, "--data", "example", "--headroom", "inf"], "--headroom': 'inf' is not a finite number"),
])
def test_usage_errors_are_one_line(args, expected):
    one_error_line(run(*args), expected)


def test_huge_input_shapes_are_refused_before_allocating(tmp_path):
    from onnx import helper
    from onnx_graphs import build, exp_softmax_by_hand, save, tensor

    gate = exp_softmax_by_hand(tmp_path)
    one_error_line(run("check", gate, "--input-shape", "x=1000000000x4"), "4,000,000,000 elements")
    huge = save(build([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2**40, 4])],
                      [tensor("y", [2**40, 4])]), tmp_path, "huge.onnx")
    one_error_line(run("check", huge), "declares 4,398,046,511,104 elements")


def test_nul_bytes_in_a_model_file_are_a_clear_syntax_error(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"def get_model():\n    return 1\x00\n")
    result = run("scan", path)
    one_error_line(result, "syntax error")
    assert "None" not in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_an_unreadable_model_file_says_so(tmp_path):
    path = shutil.copy(HAZARD, tmp_path / "m.py")
    os.chmod(path, 0)
    one_error_line(run("scan", path), "cannot read")


def test_an_unreadable_model_file_says_so_even_as_root(monkeypatch):
    from precisionaudit.frontend import python_file

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)

    python_file._read.cache_clear()  # read before by another test: what is on disk now is unreadable
    monkeypatch.setattr(python_file, "open", denied, raising=False)
    one_error_line(run("scan", HAZARD), "cannot read: Permission denied")


DOCUMENTS = {  # (option, file name, bytes that are not UTF-8, text nested 100000 deep)
    "config": ("--config", "precisionaudit.toml", b"dtype = '\xff'\n", "select = " + "[" * 100000 + "]" * 100000),
    "plan": ("--plan", "plan.yaml", b"version: 1\n# \xff\n", "version: " + "[" * 100000 + "]" * 100000),
    "baseline": ("--baseline", "b.json", b'{"tool": "\xff"}', "[" * 100000 + "]" * 100000),
}


@pytest.mark.parametrize("what", sorted(DOCUMENTS))
@pytest.mark.parametrize("problem", ["not UTF-8", "nested too deeply"])
def test_unreadable_settings_plans_and_baselines_are_one_line(tmp_path, what, problem):
    option, name, not_utf8, deep = DOCUMENTS[what]
    path = tmp_path / name
    if problem == "not UTF-8":
        path.write_bytes(not_utf8)
    else:
        path.write_text(deep)
    command = "check" if what == "plan" else "scan"
    one_error_line(run(command, HAZARD, option, path), f"the {what} is {problem}")


def test_a_plan_version_of_true_is_not_version_1(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("version: true\ntarget: {dtype: float16, mode: autocast}\noverrides: []\n")
    one_error_line(run("check", HAZARD, "--plan", plan), "plan version True is not supported")


def test_an_empty_rule_id_selects_nothing_it_is_refused(tmp_path):
    config = tmp_path / "precisionaudit.toml"
    config.write_text('select = [""]\n')
    one_error_line(run("scan", HAZARD, "--config", config), "select: expected a rule id, got ''")


def test_a_file_name_that_is_not_utf8_keeps_reports_and_plans_valid(tmp_path):
    folder = os.fsencode(str(tmp_path))
    model = os.fsdecode(folder + b"/\xff.py")
    shutil.copy(HAZARD, model)
    for fmt in ("json", "sarif"):
        result = run("scan", model, "--format", fmt, "--mode", "pure")
        assert result.exit_code == 1, result.stderr
        json.loads(result.stdout)
    plan = os.fsdecode(folder + b"/\xfe.yaml")
    assert run("plan", model, "--mode", "pure", "-o", plan).exit_code == 0
    assert run("check", model, "--mode", "pure", "--plan", plan, "--device", "cpu").exit_code == 0
    baseline = os.fsdecode(folder + b"/\xfd.json")
    assert run("scan", model, "--mode", "pure", "--write-baseline", baseline).exit_code == 0
    assert run("scan", model, "--mode", "pure", "--baseline", baseline).exit_code == 0


def test_external_data_behind_a_symlink_or_short_is_said_so(tmp_path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    from onnx_graphs import build, tensor

    model = build([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor("x", [2, 64])],
                  [tensor("y", [2, 64])], [numpy_helper.from_array(np.ones((64, 64), np.float32), "w")])
    path = str(tmp_path / "m.onnx")
    onnx.save_model(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    os.rename(tmp_path / "m.data", tmp_path / "real.data")
    os.symlink(tmp_path / "real.data", tmp_path / "m.data")
    one_error_line(run("scan", path), "m.data is a symbolic link, which onnx refuses to follow")
    os.remove(tmp_path / "m.data")
    (tmp_path / "m.data").write_bytes((tmp_path / "real.data").read_bytes()[:100])
    one_error_line(run("scan", path), "external data shorter than declared")
    os.remove(tmp_path / "m.data")
    one_error_line(run("scan", path), "external data missing")


def test_a_device_as_model_file_is_refused():
    one_error_line(run("scan", "/dev/zero"), "not a regular file")
    one_error_line(run("check", "/dev/zero"), "not a regular file")


def test_stdout_on_a_full_disk_is_one_line():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "precisionaudit", "rules"], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "precisionaudit: error: cannot write the output: No space left on device"]


# --------------------------------------------------------------------------- signals
def test_ctrl_c_exits_130_and_sigterm_143(tmp_path):
    path = write_model(tmp_path, LOOP, "loop.py")
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        proc = subprocess.Popen([sys.executable, "-m", "precisionaudit", "scan", str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            _wait_for_forward(proc, tmp_path)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == code, err
        assert "Traceback" not in err


def _wait_for_forward(proc, tmp_path, limit=60.0):
    """Signal once the model's code runs (torch imported), not during interpreter start-up."""
    import time

    started = time.monotonic()
    while time.monotonic() - started < limit:
        if proc.poll() is not None:
            return
        try:
            with open(f"/proc/{proc.pid}/maps") as fh:
                maps = fh.read()
        except OSError:
            return
        if "libtorch_cpu" in maps:
            time.sleep(3)
            return
        time.sleep(0.2)


def test_sigterm_during_converts_write_leaves_no_staging_file(tmp_path, monkeypatch):
    """The defect was convert's: SIGTERM (Terminated, exit 143) while the model is saved."""
    from onnx_graphs import exp_softmax_by_hand

    from precisionaudit.runtime.onnx import io
    from precisionaudit.core.signals import Terminated

    gate = exp_softmax_by_hand(tmp_path)

    def terminated_midway(model, path):
        with open(path, "wb") as fh:
            fh.write(model.SerializeToString()[:100])
        raise Terminated()

    monkeypatch.setattr(io, "_save", terminated_midway)
    one_error_line(run("convert", gate, "-o", tmp_path / "out.onnx"), "terminated", code=143)
    assert sorted(os.listdir(tmp_path)) == ["gate.onnx"]


def test_an_interrupted_write_leaves_no_staging_file(tmp_path, monkeypatch):
    from precisionaudit.core import atomic
    from precisionaudit.core.signals import Terminated

    def terminated_midway(*args, **kwargs):
        raise Terminated()

    monkeypatch.setattr(atomic.os, "replace", terminated_midway)
    with pytest.raises(Terminated):
        atomic.write_text_atomic(str(tmp_path / "plan.yaml"), "x", "plan")
    assert os.listdir(tmp_path) == []
