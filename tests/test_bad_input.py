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


def test_wrong_inputs_never_allocate_the_real_model(monkeypatch):
    """A shape error is the model's, not fake tensors': no eager retry."""
    from precisionaudit.capture.pytorch import capture as pytorch

    calls = []
    real_run = pytorch._run
    monkeypatch.setattr(pytorch, "_run", lambda *a, fake: calls.append(fake) or real_run(*a, fake=fake))
    with pytest.raises(Exception, match="forward failed on the example inputs"):
        pytorch.capture_file(os.path.join(BAD, "wrong_inputs.py"), pytorch.Target())
    assert calls == [True]
