"""Issue 21: a model file's code runs in a child process, so it cannot forge the verdict
(``os._exit(0)``), hang the gate (an endless C call), or outlive the scan (threads and
processes it leaves behind). The command-line tests run the real command, in a process that
has not run torch before the fork, as a pre-commit hook does."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest
from conftest import sample

from precisionaudit.core.isolation import ChildLost, RemoteTraceback, in_child
from precisionaudit.core.signals import TimeLimitExceeded

CLEAN = sample("pa111_output_clean.py")
INPUTS = "\n\ndef get_example_inputs():\n    return (torch.zeros(2, 4),)\n"


def model_file(tmp_path, name, get_model_body):
    path = tmp_path / name
    path.write_text("import os, sys, threading, time, ctypes, subprocess\nimport torch\n\n\n"
                    "def get_model():\n" + textwrap.indent(textwrap.dedent(get_model_body), "    ")
                    + "\n    return torch.nn.Linear(4, 4)\n" + INPUTS)
    return str(path)


def cli(*args, timeout=120):
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "precisionaudit", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    done.seconds = time.monotonic() - started
    return done


def error_lines(done):
    return [line for line in done.stderr.splitlines() if line.startswith("precisionaudit: error:")]


def test_os_exit_0_in_get_model_cannot_pass_the_gate(tmp_path):
    path = model_file(tmp_path, "exits.py", "os._exit(0)")
    done = cli("scan", path, CLEAN, "--format", "json")
    assert done.returncode == 2, done.stderr
    assert error_lines(done) == [f"precisionaudit: error: {path}: its process exited (status 0) before "
                                 "the analysis ended (os._exit() or a crash in the model's code)"]
    statuses = {m["path"]: m["status"] for m in json.loads(done.stdout)["models"]}
    assert statuses == {path: "error", CLEAN: "ok"}, "the other model is still reported"


def test_a_crash_is_that_models_error(tmp_path):
    path = model_file(tmp_path, "crashes.py", "ctypes.string_at(0)")
    done = cli("scan", path)
    assert done.returncode == 2
    assert error_lines(done) == [f"precisionaudit: error: {path}: its process was killed by SIGSEGV"]


def test_a_model_stuck_in_c_is_killed_at_the_limit(tmp_path):
    """libc's sleep holds the interpreter in one C call: no in-process time limit can stop it."""
    path = model_file(tmp_path, "stuck.py", "ctypes.CDLL(None).sleep(1000)")
    done = cli("scan", path, CLEAN, "--timeout", "20")
    assert done.returncode == 2
    assert error_lines(done) == [f"precisionaudit: error: {path}: timed out after 20 s (--timeout)"]
    assert "pa111_output_clean.py" in done.stdout, "the next model is scanned after the kill"
    assert done.seconds < 100


def test_threads_and_processes_a_model_leaves_die_with_it(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    path = model_file(tmp_path, "leaves.py", f"""\
        threading.Thread(target=time.sleep, args=(1000,)).start()  # non-daemon: blocks interpreter exit
        sleeper = subprocess.Popen(["sleep", "1000"])
        open({str(pid_file)!r}, "w").write(str(sleeper.pid))""")
    done = cli("scan", path, "--exit-zero", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "leaves.py [get_model]" in done.stdout
    assert not alive(int(pid_file.read_text())), "the model's subprocess outlived the scan"


def alive(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` still runs after ``within_s``: gone, or killed and waiting to be reaped
    by whoever adopted it (a zombie), is not alive."""
    until = time.monotonic() + within_s
    while time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.1)
    return True


def test_writes_to_fd_1_and_reads_of_stdin_cannot_corrupt_the_report(tmp_path):
    path = model_file(tmp_path, "noisy.py", """\
        os.write(1, b"not json\\n")
        sys.stdin.read()  # /dev/null in the child: returns at once""")
    done = cli("scan", path, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["models"][0]["status"] == "ok"
    assert "not json" in done.stderr


def test_explain_plan_and_check_run_the_model_in_a_child_too(tmp_path):
    path = model_file(tmp_path, "exits.py", "os._exit(0)")
    for command in ("explain", "check", "plan"):
        done = cli(command, path)
        assert done.returncode == 2, (command, done.stderr)
        assert len(error_lines(done)) == 1 and "its process exited (status 0)" in done.stderr, command


def test_the_default_time_limit_and_no_limit():
    from click.testing import CliRunner

    from precisionaudit.cli import main

    for command in ("scan", "explain", "plan", "check"):
        help_text = CliRunner().invoke(main, [command, "--help"]).output
        assert "[default: 600;" in " ".join(help_text.split()), command
    done = cli("scan", CLEAN, "--timeout", "0")
    assert done.returncode == 0, done.stderr


# in_child itself, forced to fork in the test process (which has run torch kernels: the
# child runs on one thread, as after learned imports)

@pytest.fixture
def forking(monkeypatch):
    from precisionaudit.core import isolation

    monkeypatch.setattr(isolation, "_fork", True)
    monkeypatch.setattr(isolation, "_one_thread", True)


def test_the_python_api_and_an_in_process_command_do_not_fork(monkeypatch):
    """A command started in a process that has imported torch (a test runner's CliRunner, an
    application) runs the model in that process: forking it could hang the child."""
    import torch  # noqa: F401 - the premise: this process has imported torch
    from click.testing import CliRunner

    from precisionaudit.cli import main

    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked"))
    result = CliRunner().invoke(main, ["scan", CLEAN])
    assert result.exit_code == 0, result.output


def test_a_value_comes_back(forking):
    assert in_child(sorted, [3, 1, 2]) == [1, 2, 3]


def test_what_the_child_raises_is_raised_with_its_traceback(forking):
    def fails():
        raise ValueError("bad value")

    with pytest.raises(ValueError, match="bad value") as caught:
        in_child(fails)
    assert isinstance(caught.value.__cause__, RemoteTraceback)
    assert "in fails" in str(caught.value.__cause__)


def test_an_exception_that_cannot_travel_becomes_a_runtime_error(forking):
    class Local(Exception):  # a local class cannot be pickled
        pass

    def fails():
        raise Local("odd")

    with pytest.raises(RuntimeError, match="Local: odd"):
        in_child(fails)


def test_a_child_that_exits_or_hangs_is_lost_or_timed_out(forking):
    with pytest.raises(ChildLost, match="status 3"):
        in_child(os._exit, 3)
    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded):
        in_child(time.sleep, 100, timeout=0.5)
    assert time.monotonic() - started < 10


def test_the_child_runs_torch_kernels_after_the_parent_has(forking):
    """A forked child of a process whose OpenMP/BLAS pools exist hangs in its first parallel
    kernel unless it runs on one thread."""
    import torch

    a = torch.randn(512, 512)
    (a @ a).sum()
    torch.randn(4_000_000).exp().sum()
    assert in_child(lambda: float((a @ a).trace() - (a @ a).trace()), timeout=60) == 0.0


def test_library_modules_a_child_imports_are_imported_here_before_the_next(tmp_path, monkeypatch, forking):
    """A scan of many models imports a model's library code (transformers' modelling modules)
    twice, not once per model; the user's own modules never run in the parent."""
    import importlib

    from precisionaudit.core import isolation

    (tmp_path / "users_own_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    library = next(name for name in ("colorsys", "sndhdr", "xdrlib", "mailcap", "netrc")
                   if name not in sys.modules and importlib.util.find_spec(name))
    in_child(lambda: [importlib.import_module(m) for m in (library, "users_own_module")] and None)
    assert library not in sys.modules and "users_own_module" not in sys.modules
    isolation.import_learned()
    assert library in sys.modules, "the parent imports what the child imported from the library"
    assert "users_own_module" not in sys.modules, "a module beside the model is never imported here"


def test_what_the_child_prints_reaches_the_parent_where_its_streams_are_no_files(forking, monkeypatch):
    """An application (or click's CliRunner) whose sys.stdout/sys.stderr are StringIOs still gets
    what the model printed, on stderr: the child's copies of those objects die with it."""
    import io

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", err)
    assert in_child(lambda: print("from the model") or 7) == 7
    assert err.getvalue() == "from the model\n" and sys.stdout.getvalue() == ""


# --- whatever ends the scan, no process of it remains (issue 36)

FOREVER = """\
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a model that ignores SIGTERM
signal.signal(signal.SIGHUP, signal.SIG_IGN)
# and a process it spawns that ignores them too (dispositions set to ignore survive exec)
sleeper = subprocess.Popen(["sh", "-c", "trap '' TERM HUP INT; exec sleep 1000"])
with open({pids!r} + ".tmp", "w") as f:
    f.write(f"{{os.getpid()}} {{sleeper.pid}}")
os.rename({pids!r} + ".tmp", {pids!r})
while True:
    pass
"""


def processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) of every process (Linux /proc)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
    return found


def descendants(root: int) -> set[int]:
    table, found, frontier = processes(), set(), {root}
    while frontier:
        frontier = {pid for pid, (parent, _, _) in table.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pids: set[int], groups: set[int]) -> set[int]:
    """Those of ``pids``, or members of ``groups``, still running (zombies are not)."""
    return {pid for pid, (_, group, state) in processes().items()
            if (pid in pids or group in groups) and state != "Z"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig,code,line", [
    (signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated"),
    (signal.SIGHUP, 129, "terminated: its terminal hung up (SIGHUP)"), (signal.SIGKILL, -signal.SIGKILL, None)],
    ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_no_process_of_a_scan_outlives_it(tmp_path, sig, code, line):
    """A cancelled CI job (SIGTERM, then SIGKILL), a closed terminal (SIGHUP), Ctrl-C or the
    OOM killer (SIGKILL) ends a scan whose model loops for ever: the model's process, which
    ignores SIGTERM and SIGHUP, and what it spawned end with it."""
    pids = tmp_path / "pids"
    path = model_file(tmp_path, "forever.py", "import signal\n" + FOREVER.format(pids=str(pids)))
    with open(tmp_path / "out", "w") as out:
        scan = subprocess.Popen([sys.executable, "-m", "precisionaudit", "scan", path, "--timeout", "0"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        until = time.monotonic() + 300
        while not pids.exists() and scan.poll() is None and time.monotonic() < until:
            time.sleep(0.2)
        assert pids.exists(), (tmp_path / "out").read_text()
        child, sleeper = map(int, pids.read_text().split())
        scan_processes = descendants(scan.pid)
        assert {child, sleeper} <= scan_processes
        os.kill(scan.pid, sig)
        assert scan.wait(timeout=120) == code, (tmp_path / "out").read_text()
        if line:  # docs/exit-codes.md
            assert error_lines(SimpleNamespace(stderr=(tmp_path / "out").read_text())) == [
                f"precisionaudit: error: {line}"]
    finally:
        if scan.poll() is None:
            scan.kill()
    until = time.monotonic() + 30
    while running(scan_processes, {child}) and time.monotonic() < until:
        time.sleep(0.2)
    assert not running(scan_processes, {child}), "a process of the scan outlived it"
