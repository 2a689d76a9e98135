"""The fuzz suite of issue 11 (hypothesis): generated command lines, settings/plans/baselines
and model files, each judged by tests/fuzzing.py. Whatever the case, the command ends in
``ok`` (exit 0/1) or ``error`` (exit 2, one line): no traceback, no internal error, no hang,
no user file changed, no output half-written. The examples are derandomized (the same
cases every run, so CI is reproducible); bench/fuzz.py runs more of them, and other seeds.
Every verdict goes to fuzzing.TALLY, whose summary line ends the test run."""
import os

import pytest
from fuzz_cases import BUDGET, CLI, DOCUMENTS, MODELS, run_cli, run_document, run_model
from fuzzing import OK, TALLY, judge
from hypothesis import HealthCheck, given, settings

LIMIT_S = 60.0


def budget(examples):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def judged(family, run, case):
    verdict, detail, what = run(case, LIMIT_S)
    TALLY.add(family, verdict, what, detail)
    assert verdict in OK, f"{what}: {verdict}: {detail}"


@budget(BUDGET["cli"])
@given(CLI)
def test_any_command_line_is_a_result_or_one_error_line(case):
    judged("cli", run_cli, case)


@budget(BUDGET["documents"])
@given(DOCUMENTS)
def test_any_settings_plan_or_baseline_is_read_or_refused_in_one_line(case):
    judged("documents", run_document, case)


@budget(BUDGET["models"])
@given(MODELS)
def test_any_model_file_and_its_mischief_is_a_result_or_that_models_error(case):
    judged("models", run_model, case)


def _overwrite_the_model(monkeypatch):
    from precisionaudit import cli

    monkeypatch.setattr(cli, "checked_output", lambda path, inputs, what: path)  # no refusal


def _internal_bug(monkeypatch):
    from precisionaudit.rules import engine

    monkeypatch.setattr(engine, "run_rules", lambda *a, **k: 1 / 0)


def _escaping_bug(monkeypatch):
    from precisionaudit.core import exits

    def fail(message, debug=False, code=2):
        raise RuntimeError(message)

    monkeypatch.setattr(exits, "fail", fail)


def _endless_rules(monkeypatch):
    import time

    from precisionaudit.rules import engine

    monkeypatch.setattr(engine, "run_rules", lambda *a, **k: time.sleep(600))


def _write_in_place_then_fail(monkeypatch):
    from precisionaudit.core import atomic
    from precisionaudit.core.errors import UsageError

    def in_place(path, text, what):
        with open(path, "w") as fh:
            fh.write(text[: len(text) // 2])
        raise UsageError("disk full")

    monkeypatch.setattr(atomic, "write_text_atomic", in_place)


def _staging_file_kept(monkeypatch):
    from precisionaudit.core import atomic

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", failing_replace)
    monkeypatch.setattr(atomic.os, "unlink", lambda path: None)


def _vague_error(monkeypatch):
    import sys

    from precisionaudit.rules import engine

    monkeypatch.setattr(engine, "run_rules", lambda *a, **k: sys.exit(2))


REGRESSIONS = {  # verdict: (how the tool is broken, the command line, its outputs)
    "changed": (_overwrite_the_model, ["plan", "{m}", "-o", "{m}"], {}),
    "internal": (_internal_bug, ["scan", "{m}"], {}),
    "traceback": (_escaping_bug, ["scan", "{m}", "--select", "XY1"], {}),
    "hang": (_endless_rules, ["scan", "{m}"], {}),
    "half-written": (_write_in_place_then_fail, ["plan", "{m}", "-o", "{out}"], {"{out}": "plan"}),
    "leftover": (_staging_file_kept, ["plan", "{m}", "-o", "{out}"], {"{out}": "plan"}),
    "unclear": (_vague_error, ["scan", "{m}"], {}),
}


@pytest.mark.parametrize("verdict", sorted(REGRESSIONS))
def test_the_judge_sees_each_kind_of_defect(tmp_path, monkeypatch, verdict):
    """The fuzz suite's zeros mean something: each defect, put into the tool on purpose, is
    the verdict it should be (and the same command without it is not)."""
    from fuzz_cases import MODEL

    (tmp_path / "m.py").write_text(MODEL)
    names = {"m": str(tmp_path / "m.py"), "out": str(tmp_path / "out.yaml")}
    breaks, argv, outputs = REGRESSIONS[verdict]
    argv = [a.format(**names) for a in argv]
    outputs = {k.format(**names): v for k, v in outputs.items()}
    assert judge(argv, str(tmp_path), outputs, limit_s=60)[0] in OK
    breaks(monkeypatch)
    assert judge(argv, str(tmp_path), outputs, limit_s=2 if verdict == "hang" else 60)[0] == verdict


def _file_options():
    from fuzz_cases import COMMANDS, OPTIONS, OUTPUT_OPTIONS

    return [(command, option) for command, (_, options) in sorted(COMMANDS.items()) for option in options
            if "{pipe}" in OPTIONS[option][1] and option not in OUTPUT_OPTIONS]


@pytest.mark.parametrize("command,option", _file_options())
def test_every_file_an_option_reads_may_be_a_fifo_a_device_or_a_folder(command, option):
    """What hypothesis draws only now and then, for every option that reads a file: a FIFO
    (open() waits for a writer: scan --baseline FIFO hung), /dev/zero, a folder, nothing."""
    from fuzz_cases import Scratch

    with Scratch() as folder:
        model = os.path.join(folder, "g.onnx" if command == "convert" else "m.py")
        outputs = {os.path.join(folder, "out.onnx"): "onnx"} if command == "convert" else {}
        for odd in ("pipe", "/dev/zero", "sub", "missing"):
            argv = [command, model, option, os.path.join(folder, odd), *(["-o", *outputs] if outputs else [])]
            verdict, detail = judge(argv, folder, outputs, limit_s=30)
            TALLY.add("cli", verdict, " ".join(argv), detail)
            assert verdict in OK, (argv, verdict, detail)
