"""Bad input: one clear line on stderr, exit 2, no traceback, nothing on stdout."""
import os

import pytest
from click.testing import CliRunner
from conftest import ROOT

from precisionaudit.cli import main

BAD = os.path.join(ROOT, "tests", "bad_models")

CASES = {
    "missing file": (["scan", os.path.join(BAD, "nope.py")], "no such file"),
    # a folder or file no selected rule reads: without --select, the training rules read any .py
    "directory without models": (["scan", os.path.join(BAD, "empty_dir"), "--select", "PA1"], "no model files"),
    "syntax error": (["scan", os.path.join(BAD, "syntax_error.py")], "syntax error"),
    "import error": (["scan", os.path.join(BAD, "import_error.py")], "not_a_real_package_xyz"),
    "no get_model": (["scan", os.path.join(BAD, "no_get_model.py"), "--entry", "make", "--select", "PA1"],
                     "no function make()"),
    "get_model raises": (["scan", os.path.join(BAD, "get_model_raises.py")], "checkpoint missing"),
    "inputs do not fit": (["scan", os.path.join(BAD, "wrong_inputs.py")], "forward failed on the example inputs"),
    "not a module": (["scan", os.path.join(BAD, "not_a_module.py")], "not a torch.nn.Module"),
    "cannot be captured": (["scan", os.path.join(BAD, "uncapturable.py")], "unsupported configuration"),
    "explain of missing file": (["explain", os.path.join(BAD, "nope.py")], "no such file"),
    "unknown rule": (["rules", "PA999"], "unknown rule"),
    "unknown select": (["scan", os.path.join(ROOT, "sample_models", "pa111_output_clean.py"),
                        "--select", "XY1"], "unknown rule id"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_clear_line_and_exit_2(case):
    args, expected = CASES[case]
    result = CliRunner().invoke(main, args)
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines), result.stdout) == (2, 1, "")
    assert lines[0].startswith("precisionaudit: error:") and expected in lines[0]
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback():
    result = CliRunner().invoke(main, ["scan", "--debug", os.path.join(BAD, "get_model_raises.py")])
    assert result.exit_code == 2 and "Traceback" in result.stderr


def test_wrong_inputs_are_the_models_own_error_once_a_real_run_fails_the_same_way(monkeypatch):
    """A shape error on fake tensors is checked on real ones (issue 44: whose error is it?):
    the eager run fails too, so the message names its error as the model's own."""
    from precisionaudit.capture.pytorch import capture as pytorch

    calls = []
    real_run = pytorch._run
    monkeypatch.setattr(pytorch, "_run", lambda *a, fake, **kw: calls.append(fake) or real_run(*a, fake=fake, **kw))
    with pytest.raises(Exception, match="forward failed on the example inputs: RuntimeError: mat1 and mat2 shapes "
                                        r".*\(the model's own error, not the scan's: it fails eagerly on real tensors too\)"):
        pytorch.capture_file(os.path.join(BAD, "wrong_inputs.py"), pytorch.Target())
    assert calls == [True, False]


def test_wrong_inputs_never_allocate_a_model_too_large_to_run(monkeypatch):
    """Weights above what a real run may take are never allocated: the fake failure stays
    the error, saying it was not checked on real tensors."""
    from precisionaudit.capture.pytorch import capture as pytorch

    calls = []
    real_run = pytorch._run
    monkeypatch.setattr(pytorch, "_run", lambda *a, fake, **kw: calls.append(fake) or real_run(*a, fake=fake, **kw))
    monkeypatch.setattr(pytorch, "eager_budget", lambda: 1024)  # bytes: less than the Linear's 16 KiB
    with pytest.raises(Exception, match=r"forward failed on fake tensors: RuntimeError: .* \(not checked on real "
                                        r"tensors, since its weights take 16.2 KiB"):
        pytorch.capture_file(os.path.join(BAD, "wrong_inputs.py"), pytorch.Target())
    assert calls == [True]


@pytest.mark.parametrize("option", ["--entry", "--inputs"])
@pytest.mark.parametrize("value", ["", "get model", "1st"])
def test_an_empty_or_malformed_function_name_is_a_usage_error(option, value):
    """``--entry ''`` read the model file as a training script and passed with 0 findings
    (issue 41): a name that is no Python function name is exit 2, one line."""
    result = CliRunner().invoke(main, ["scan", os.path.join(ROOT, "sample_models", "pa111_output_clean.py"),
                                       option, value])
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines), result.stdout) == (2, 1, "")
    assert lines[0].startswith(f"precisionaudit: error: Invalid value for '{option}'")


# --debug in the model's child process (the CLI forks only where torch is not imported yet,
# so these run the command line as a user does)
BROKEN_FORWARD = """import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return deep_in_the_model(x)


def deep_in_the_model(x):
    return x @ None


def get_model():
    return Net()


def get_example_inputs():
    return (torch.zeros(2, 4),)
"""
#: the model's code breaks one of our passes in the child: an internal error raised there
OUR_BUG = """import torch
import precisionaudit.analysis.work


def injected_bug_in_a_pass(graph):
    raise ZeroDivisionError("a bug of ours")


precisionaudit.analysis.work.annotate = injected_bug_in_a_pass  # the last pass, run after the capture


def get_model():
    return torch.nn.Linear(4, 4)


def get_example_inputs():
    return (torch.zeros(2, 4),)
"""


def run_cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "precisionaudit", *map(str, args)], capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", ["scan", "plan", "check", "explain"])
def test_debug_shows_the_traceback_raised_in_the_models_child(command, tmp_path):
    """The traceback printed is the child's, down to the model's own line, not only the
    parent's re-raise (issue 41)."""
    path = tmp_path / "broken.py"
    path.write_text(BROKEN_FORWARD)
    done = run_cli(command, path, "--debug")
    assert done.returncode == 2
    assert "deep_in_the_model" in done.stderr and "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("precisionaudit: error:")


def test_an_internal_error_in_the_child_shows_its_traceback_under_debug(tmp_path):
    path = tmp_path / "our_bug.py"
    path.write_text(OUR_BUG)
    quiet, debug = run_cli("scan", path), run_cli("scan", path, "--debug")
    assert quiet.returncode == debug.returncode == 2
    assert "internal error, please report: ZeroDivisionError" in quiet.stderr
    assert "rerun with --debug" in quiet.stderr and "Traceback" not in quiet.stderr
    assert "injected_bug_in_a_pass" in debug.stderr and "rerun with --debug" not in debug.stderr
