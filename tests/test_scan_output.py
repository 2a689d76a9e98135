"""scan's output as people and scripts meet it: streamed per model, a progress line and colour
only on a terminal (NO_COLOR honoured), the elapsed time, --output-file, --statistics,
--exit-zero."""
import json
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time

import pytest
from gate_models import HAZARD, write

from precisionaudit.report.console import Progress, color_enabled

BAD = os.path.join(os.path.dirname(__file__), "bad_models")
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;;[^\x1b]*\x1b\\")  # styles and OSC 8 links


@pytest.fixture
def project(gate_project):
    return gate_project


class _Terminal:
    def __init__(self, tty: bool):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_progress_line_only_on_a_terminal_and_cleared_after():
    terminal, pipe = _Terminal(True), _Terminal(False)
    for stream in (terminal, pipe):
        progress = Progress(2, stream)
        progress.update(1, "a_long_name.py")
        progress.update(2, "b.py")
        progress.clear()
    assert pipe.text == ""
    assert "[1/2] scanning a_long_name.py" in terminal.text and "[2/2] scanning b.py" in terminal.text
    assert terminal.text.endswith("\r")  # the line is blanked: the report starts at column 0
    last = terminal.text.rsplit("\r", 2)[-2]
    assert last.strip() == ""


@pytest.mark.parametrize("choice, tty, no_color, expected", [
    ("auto", True, None, True), ("auto", False, None, False), ("auto", True, "1", False),
    ("always", False, "1", True), ("never", True, None, False)])
def test_color_choice(monkeypatch, choice, tty, no_color, expected):
    monkeypatch.delenv("NO_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert color_enabled(choice, _Terminal(tty)) is expected
    assert color_enabled(choice, _Terminal(tty), to_file=True) is (choice == "always")


def test_color_flag_and_a_plain_pipe(project, cli):
    plain = cli("scan", "--isolated", "model.py")
    assert not ANSI.search(plain.stdout) and "\r" not in plain.stderr  # not a terminal: no progress
    colored = cli("scan", "--isolated", "--color", "always", "model.py")
    def same(text):
        return re.sub(r"\(\d+\.\d s\)", "(time)", ANSI.sub("", text))

    assert "\x1b[31mPA107\x1b[0m" in colored.stdout and same(colored.stdout) == same(plain.stdout)


def _on_terminals(args, cwd, env=None):
    """Run the CLI with stdout and stderr each on its own pseudo-terminal: (stdout, stderr)."""
    ptys = [pty.openpty(), pty.openpty()]
    proc = subprocess.Popen([sys.executable, "-m", "precisionaudit", *args], cwd=cwd,
                            stdout=ptys[0][1], stderr=ptys[1][1], env={**os.environ, **(env or {})})
    for _, slave in ptys:
        os.close(slave)
    texts = {fd: b"" for fd, _ in ptys}
    open_fds = [fd for fd, _ in ptys]
    deadline = time.monotonic() + 120
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(open_fds, [], [], 1)
        for fd in ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other end closed
                chunk = b""
            if chunk:
                texts[fd] += chunk
            else:
                open_fds.remove(fd)
                os.close(fd)
    proc.wait(timeout=30)
    return [texts[fd].decode() for fd, _ in ptys]


def test_on_a_terminal_progress_goes_to_stderr_and_the_report_is_coloured(project, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    stdout, stderr = _on_terminals(["scan", "--isolated", "model.py", "clean.py"], project)
    assert "[1/2] scanning model.py" in stderr and "[2/2] scanning clean.py" in stderr
    assert "scanning" not in stdout and ANSI.search(stdout)
    assert "PA107" in ANSI.sub("", stdout)
    stdout, _ = _on_terminals(["scan", "--isolated", "model.py"], project, {"NO_COLOR": "1"})
    assert not ANSI.search(stdout) and "model.py:12:18: PA107" in stdout


def test_each_model_is_printed_as_it_finishes(tmp_path):
    """The second model waits for a file the test writes only once the first model's result
    has been read from the pipe: without streaming the scan would never finish."""
    write(tmp_path, "a_first.py", HAZARD)
    write(tmp_path, "b_second.py", textwrap.dedent('''\
        import os, time
        from a_first import get_example_inputs, get_model as _model


        def get_model():
            deadline = time.monotonic() + 60
            while not os.path.exists("go") and time.monotonic() < deadline:
                time.sleep(0.05)
            return _model()
        '''))
    proc = subprocess.Popen([sys.executable, "-m", "precisionaudit", "scan", "--isolated", "."],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 50)
        assert ready, "nothing on stdout while the second model was still loading"
        first = proc.stdout.readline()
        assert first.startswith("./a_first.py [get_model]") and not os.path.exists(tmp_path / "go")
        (tmp_path / "go").write_text("")
        rest, _ = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert "./b_second.py [get_model]" in rest
    assert re.search(r"^found 2 errors, 0 warnings, 0 info in 2 models \(\d+\.\d s\)$", rest, re.M)


def test_output_file_holds_the_report_and_stdout_stays_empty(project, cli):
    shown = cli("scan", "--isolated", "--format", "json", "model.py")
    written = cli("scan", "--isolated", "--format", "json", "-o", "report.json", "model.py")
    assert written.exit_code == shown.exit_code == 1 and written.stdout == ""
    assert json.loads((project / "report.json").read_text()) == json.loads(shown.stdout)
    text = cli("scan", "--isolated", "--color", "auto", "--output-file", "report.txt", "model.py")
    assert text.stdout == "" and "model.py:12:18: PA107" in (project / "report.txt").read_text()


def test_output_file_is_not_written_when_every_model_failed_nor_in_a_missing_directory(project, cli):
    failed = cli("scan", "-o", "report.json", "--format", "json", os.path.join(BAD, "get_model_raises.py"))
    assert failed.exit_code == 2 and not (project / "report.json").exists()
    missing = cli("scan", "-o", "nowhere/report.json", "model.py")
    assert missing.exit_code == 2 and "nowhere/report.json: cannot write report: folder nowhere does not exist" in missing.stderr
    assert "model.py [get_model]" not in missing.stdout  # said before any model is scanned


def test_statistics_count_findings_per_rule(project, cli):
    sample = os.path.join(os.path.dirname(BAD), "..", "sample_models", "pa201_gemm_hazard.py")
    text = cli("scan", "--isolated", "--statistics", "model.py", sample)
    assert text.exit_code == 1
    assert text.stdout == "2  PA201  tc-unaligned-gemm\n1  PA107  unrepresentable-constant\n"
    data = json.loads(cli("scan", "--isolated", "--statistics", "--format", "json", "model.py", sample).stdout)
    assert data == [{"rule": "PA201", "name": "tc-unaligned-gemm", "count": 2},
                    {"rule": "PA107", "name": "unrepresentable-constant", "count": 1}]
    sarif = cli("scan", "--statistics", "--format", "sarif", "model.py")
    assert sarif.exit_code == 2 and "--statistics shows text or json" in sarif.stderr


def test_exit_zero_passes_findings_but_not_failed_models(project, cli):
    assert cli("scan", "--isolated", "--exit-zero", "model.py").exit_code == 0
    assert cli("scan", "--isolated", "--exit-zero", "model.py",
               os.path.join(BAD, "get_model_raises.py")).exit_code == 2


def test_help_shows_examples(cli):
    shown = cli("scan", "--help").stdout
    assert "Examples:" in shown and "precisionaudit scan . --statistics" in shown


def test_output_file_refuses_to_overwrite_what_the_scan_reads(project, cli):
    before = (project / "model.py").read_text()
    (project / "alias.py").hardlink_to(project / "model.py")
    for target in ("model.py", "./alias.py"):
        result = cli("scan", "--isolated", "-o", target, "model.py")
        assert result.exit_code == 2 and "which this command reads" in result.stderr
        assert result.stdout == ""
    assert (project / "model.py").read_text() == before
    base = cli("scan", "--isolated", "--write-baseline", "base.json", "model.py")
    assert base.exit_code == 0
    kept = (project / "base.json").read_text()
    result = cli("scan", "--isolated", "--baseline", "base.json", "-o", "base.json", "model.py")
    assert result.exit_code == 2 and (project / "base.json").read_text() == kept


def test_findings_carry_the_column_where_the_call_starts(project, cli):
    line = HAZARD.splitlines()[11]
    column = line.index("scores.masked_fill") + 1  # 1-based, as editors count
    text = cli("scan", "--isolated", "model.py").stdout
    assert f"model.py:12:{column}: PA107" in text
    finding = json.loads(cli("scan", "--isolated", "--format", "json", "model.py").stdout)["findings"][0]
    assert (finding["line"], finding["column"]) == (12, column)
    sarif = json.loads(cli("scan", "--isolated", "--format", "sarif", "model.py").stdout)
    region = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 12, "startColumn": column}
    github = cli("scan", "--isolated", "--format", "github", "model.py").stdout
    assert f"line=12,col={column}," in github
