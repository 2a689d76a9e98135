"""Run a model file's code in a child process, so that it cannot decide how a command ends.

A model file is Python and runs with the user's rights: in-process, ``os._exit(0)`` in its
``get_model()`` would end a pre-commit gate with exit 0, an endless loop in C would hang it,
and a non-daemon thread it starts would keep the process alive after the report. So the
code that loads and runs a model runs in a forked child (as pytest-forked and xdist workers
isolate test code), and the parent owns the verdict, the exit code, the outputs and the
time limit:

- the child's answer (its return value, or what it raised) comes back pickled through a
  pipe; a child that exits, crashes or is killed without answering is :class:`ChildLost`;
- at ``timeout`` (plus a short grace, in which the child's own ``time_limit`` usually ends
  it cleanly) the parent kills the child's whole process group: :class:`TimeLimitExceeded`;
- threads and processes the model leaves behind die with the child's process group;
- the child dies with the parent, whatever ends the parent: a signal the parent handles
  (Ctrl-C, SIGTERM, SIGHUP) kills the child's group on the way out, and one it cannot
  (SIGKILL, the OOM killer) is seen by the kernel (Linux: ``PR_SET_PDEATHSIG`` sends the
  child SIGKILL) and by a guardian process: forked once, in a process group of its own, it
  holds the read end of a pipe only the parent writes to, and when that pipe closes (the
  parent is gone) it kills the process groups of the children still running, so what a
  model spawned dies too, on any POSIX system;
- the child's file descriptor 1 is its stderr (a model printing from C cannot corrupt a
  JSON report) and its stdin is ``/dev/null``.

The fork happens after torch is imported, so a child costs milliseconds, not an import.
What a child imports from installed libraries (a model file's ``transformers`` modelling
code, seconds of imports) is lost with it, so the parent imports the same library modules
before the next child (:func:`import_learned`): a scan of many models pays that import
twice, not once per model. The model file and the modules beside it are never imported in
the parent.

Forking is safe only from a process that has run no torch kernel and holds no other
threads' locks: a forked child of a process that has run a parallel kernel hangs in its first
one (the OpenMP/BLAS pools do not survive ``fork``), and POSIX promises nothing to a child of
a multi-threaded process. So a command forks only when its process had not imported torch
when it began (the command line: its process imports torch only to fork). Elsewhere (the
Python API, a test runner invoking the command in its own process) and where ``os.fork``
does not exist (Windows) the code runs in-process, with the in-process guarantees. After the
parent has imported learned library modules, whose import may have run kernels, the
children run on one thread.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import os
import pickle
import select
import signal
import site
import sys
import sysconfig
import threading
import time
import traceback

from .signals import TimeLimitExceeded

#: how long past its limit a child may take to end itself before it is killed
KILL_GRACE_S = 2.0
#: the exit status of a child that answered (anything else means it did not)
_ANSWERED = 0

#: whether in_child forks (see the module doc); set as each command begins
_fork = False
#: whether children run torch on one thread (the parent may have run torch kernels)
_one_thread = False
#: library modules children imported that this process has not imported yet
_learned: list[str] = []


class ChildLost(Exception):
    """The child ended without answering: it exited, crashed or was killed."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in the child (``__cause__`` of the one re-raised
    in the parent, as concurrent.futures does), shown by ``--debug``."""

    def __str__(self):
        return self.args[0]


def command_started() -> None:
    """Called as a command begins: whether its model code runs in children (see the module
    doc). Only a process that has not imported torch yet has surely run no kernel."""
    global _fork, _one_thread
    _fork, _one_thread = hasattr(os, "fork") and "torch" not in sys.modules, False


def in_child(fn, *args, timeout: float | None = None, **kwargs):
    """``fn(*args, **kwargs)`` run in a forked child: its return value, or what it raised.

    Raises ChildLost when the child ends without an answer and TimeLimitExceeded at
    ``timeout`` seconds (None or 0: no limit); a real Ctrl-C, SIGTERM or SIGHUP in the parent kills
    the child before it propagates; the child dies with this process whatever ends it. In-process
    where this process may not fork."""
    if not _fork:
        return fn(*args, **kwargs)
    _flush()  # what the parent printed must not be printed again by the child
    guardian = Guardian.started()
    read_fd, write_fd = os.pipe()
    parent, main_thread = os.getpid(), threading.current_thread() is threading.main_thread()
    pid = os.fork()
    if pid == 0:
        _child(read_fd, write_fd, fn, args, kwargs, parent, main_thread)  # never returns
    status = None
    try:
        os.close(write_fd)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the child does: its group exists before the guardian is told
        guardian.watch(pid)
        data = _read_answer(read_fd, timeout)
        if data is None:
            raise TimeLimitExceeded(timeout)
        status = _wait(pid, KILL_GRACE_S)
    finally:
        os.close(read_fd)
        _end(pid, status)
        guardian.forget(pid)
    if not data or status != _ANSWERED:
        raise ChildLost(_describe(status))
    kind, payload, output, imported = pickle.loads(data)
    _learned.extend(name for name in imported if name not in sys.modules)
    if output:  # the child's own stdout/stderr, where the parent's are no files (a test runner)
        sys.stderr.write(output)
    if kind == "raised":
        exc, text = payload
        exc.__cause__ = RemoteTraceback(text)
        raise exc
    return payload


def _child(read_fd, write_fd, fn, args, kwargs, parent, main_thread):
    """Run in the child: answer through ``write_fd``, then end without running any of the
    parent's exit handlers, buffers or the threads the model left behind (``os._exit``)."""
    code = 1
    try:
        _die_with(parent, main_thread)
        Guardian.close_in_child()
        os.close(read_fd)
        os.setpgid(0, 0)  # its own process group: killed as a whole, out of the terminal's Ctrl-C
        _point_stdio()
        captured = _capture_unless_files()
        if _one_thread:
            _one_torch_thread()
        modules_before = set(sys.modules)
        try:
            answer = ("value", fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - every way fn ends is the parent's to judge
            answer = ("raised", _transferable(exc))
        _flush()
        output = captured.getvalue() if captured is not None else ""
        imported = _library_modules(set(sys.modules) - modules_before)
        try:
            data = pickle.dumps((*answer, output, imported))
        except Exception as exc:  # noqa: BLE001 - an answer that cannot travel is a bug of ours
            data = pickle.dumps(("raised", _transferable(exc), output, imported))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
        code = _ANSWERED
    finally:
        with contextlib.suppress(BaseException):
            _flush()
        os._exit(code)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(parent: int, main_thread: bool) -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies. The request is
    tied to the *thread* that forked, so it is made only for a fork from the main thread,
    which lives as long as the process; the guardian covers the rest. A parent that died
    before the request took effect has already left this process to init: it ends now."""
    if sys.platform.startswith("linux") and main_thread:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class Guardian:
    """The process that kills the children's process groups when this one dies without
    doing so itself (SIGKILL, the OOM killer): see the module doc. One per process,
    started with the first child; a guardian that failed to start or died leaves the
    kernel's PDEATHSIG alone on guard."""

    _running: Guardian | None = None

    def __init__(self):
        self.fd = None  # the write end of the pipe; its closing is this process's death
        with contextlib.suppress(OSError):
            self.fd = _fork_guardian()

    @classmethod
    def started(cls) -> Guardian:
        if cls._running is None:
            cls._running = cls()
        return cls._running

    @classmethod
    def close_in_child(cls) -> None:
        """A child must not hold the pipe open: only the parent's death may close it."""
        if cls._running is not None and cls._running.fd is not None:
            os.close(cls._running.fd)
        cls._running = None

    def watch(self, pgid: int) -> None:
        self._tell(f"+{pgid}\n")

    def forget(self, pgid: int) -> None:
        self._tell(f"-{pgid}\n")

    def _tell(self, line: str) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):  # a guardian that is gone: PDEATHSIG remains
                os.write(self.fd, line.encode())


def _fork_guardian() -> int:
    """Fork the guardian; the write end of its pipe (non-inheritable: no exec'd process
    holds it)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_fd)
        return write_fd
    try:
        os.setpgid(0, 0)  # no signal to the command's process group (a terminal, a CI runner) reaches it
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never keep the caller's pipes open
            os.dup2(devnull, fd)
        os.closerange(3, read_fd)
        os.closerange(read_fd + 1, max(read_fd + 1, os.sysconf("SC_OPEN_MAX")))
        _guard(read_fd)
    finally:
        os._exit(0)


def _guard(fd: int) -> None:
    """The guardian's life: follow the groups the parent names until its pipe closes, then
    kill those still running."""
    groups, pending = set(), b""
    while chunk := os.read(fd, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def import_learned() -> None:
    """Import the library modules earlier children imported (see the module doc), so that the
    next child starts with them. One that fails to import here is skipped: the child imports
    it again itself."""
    global _one_thread
    while _learned:
        name = _learned.pop(0)
        if name not in sys.modules:
            _one_thread = True  # a library's import may run torch kernels
            with contextlib.suppress(Exception, SystemExit):
                importlib.import_module(name)


def _library_modules(names) -> list[str]:
    """Those of ``names`` (in import order) that come from the Python installation's library
    folders: never the model file, nor modules beside it or in the user's project."""
    folders = tuple({os.path.join(os.path.realpath(p), "") for p in (
        *site.getsitepackages(), site.getusersitepackages(),
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")))})
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name in names and path and os.path.realpath(path).startswith(folders):
            found.append(name)
    return found


def _point_stdio():
    """fd 1 → the parent's stderr (C code printing cannot corrupt a report on stdout), fd 0
    → /dev/null (a model that reads stdin gets EOF instead of waiting on the terminal)."""
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def _capture_unless_files():
    """Where sys.stdout/sys.stderr are no files (click's CliRunner in the tests, an embedding
    application), what the child writes to them is collected and replayed by the parent."""
    try:
        sys.stdout.fileno(), sys.stderr.fileno()
        return None
    except (AttributeError, ValueError, io.UnsupportedOperation):
        sys.stdout = sys.stderr = captured = io.StringIO()
        return captured


def _one_torch_thread():
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _transferable(exc: BaseException) -> tuple[BaseException, str]:
    """``exc`` and its traceback's text, if it survives pickling; else an equivalent
    RuntimeError (a model's own exception class may not unpickle)."""
    text = "".join(traceback.format_exception(exc))
    try:
        if type(pickle.loads(pickle.dumps(exc))) is not type(exc):
            raise TypeError(type(exc))
    except Exception:  # noqa: BLE001 - whatever pickling raises, a plain exception travels
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc, text


def _read_answer(fd: int, timeout: float | None) -> bytes | None:
    """Everything the child writes before it closes the pipe, or None at the deadline."""
    deadline = time.monotonic() + timeout + KILL_GRACE_S if timeout else None
    chunks = []
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _wait(pid: int, patience: float) -> int | None:
    """The child's wait status, once it has ended (None if it is still running after
    ``patience`` seconds: it closed its pipe but did not exit)."""
    until = time.monotonic() + patience
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= until:
            return None
        time.sleep(0.005)


def _end(pid: int, status: int | None) -> None:
    """Kill what is left of the child's process group (anything it started, and the child
    itself unless ``status`` says it has ended and was reaped), and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if status is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # before its setpgid, it is in the parent's group
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _describe(status: int | None) -> str:
    if status is None:
        return "its process closed its output but did not end, and was killed"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"its process was killed by {signal.Signals(number).name}"
        return f"its process was killed by signal {number}"
    code = os.WEXITSTATUS(status)
    return (f"its process exited (status {code}) before the analysis ended "
            "(os._exit() or a crash in the model's code)")


def _flush():
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
