"""Signals and time limits as exceptions, so that cleanup code runs and exit codes are honest.

A real Ctrl-C raises :class:`Interrupted` (exit 130), SIGTERM :class:`Terminated` (exit
143), and SIGHUP (the terminal closed) takes SIGTERM's path with its own code (129): all
are told apart from a ``KeyboardInterrupt`` that model code raises itself, and ``finally``
blocks (staging files of atomic writes, the model's child process) run. :func:`time_limit` raises
:class:`TimeLimitExceeded` in the main thread once the seconds are spent; it derives from
BaseException so that a model's ``except Exception`` cannot swallow it. One that Python
drops (raised in a gc callback or a finalizer) comes again.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

#: how long past the limit an import in progress may still finish
IMPORT_GRACE_S = 30.0
#: how often a time limit that was lost (dropped by Python, caught by a model) comes again
RAISE_AGAIN_S = 1.0


class Interrupted(KeyboardInterrupt):
    """The user pressed Ctrl-C (SIGINT)."""


class Terminated(BaseException):
    """The process received SIGTERM, or SIGHUP (``signum``)."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


class TimeLimitExceeded(BaseException):
    def __init__(self, seconds: float):
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds

    def __reduce__(self):  # it travels from a child process (core.isolation)
        return type(self), (self.seconds,)


#: the signals handled, and the exception each raises (SIGHUP: not on Windows)
_RAISED_ON = {signal.SIGINT: Interrupted, signal.SIGTERM: Terminated,
              **({signal.SIGHUP: Terminated} if hasattr(signal, "SIGHUP") else {})}


def _raise(exc_type):
    def handler(signum, frame):
        raise exc_type() if exc_type is Interrupted else exc_type(signum)
    handler.precisionaudit = True
    return handler


def _signal_behind(exc: BaseException) -> int | None:
    """The signal a real Ctrl-C, SIGTERM or SIGHUP exception stands for (the exact type: a
    model's own KeyboardInterrupt is no Ctrl-C)."""
    if type(exc) is Interrupted:
        return signal.SIGINT
    return exc.signum if type(exc) is Terminated else None


def ctrl_c_is_interrupted() -> bool:
    """Whether a real Ctrl-C now arrives as Interrupted (so a bare KeyboardInterrupt is the
    model's own); outside the command line (the Python API) it is a plain KeyboardInterrupt."""
    return getattr(signal.getsignal(signal.SIGINT), "precisionaudit", False)


@contextlib.contextmanager
def handled_signals():
    """SIGINT → Interrupted, SIGTERM and SIGHUP → Terminated while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise(exc)) for sig, exc in _RAISED_ON.items()}
    try:
        with _dropped_raised_again():
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise TimeLimitExceeded in the block after ``seconds`` (None or 0: no limit).

    Python code is interrupted between bytecodes; a single long C call (one huge kernel)
    is interrupted when it returns. An ``import`` in progress (torch imports submodules
    lazily on first use) is let finish, up to IMPORT_GRACE_S more: interrupted, it would
    leave a half-initialised module behind for every later model.

    The exception can be lost: raised while a gc callback or a finalizer runs, it is
    dropped by Python ("Exception ignored in ..."); a model may catch it. So it comes again:
    at once after a drop, and every RAISE_AGAIN_S until the block ends."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    grace_until = time.monotonic() + seconds + IMPORT_GRACE_S

    def expired(signum, frame):
        if _importing(frame) and time.monotonic() < grace_until:  # an interrupted import breaks its module
            signal.setitimer(signal.ITIMER_REAL, 0.05, RAISE_AGAIN_S)
            return
        raise TimeLimitExceeded(seconds)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, RAISE_AGAIN_S)
    try:
        with _dropped_raised_again():
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _dropped_raised_again():
    """Python drops what is raised while a gc callback, a finalizer or a weakref callback runs
    (it prints "Exception ignored in ..." and goes on): a Ctrl-C, SIGTERM, SIGHUP or time limit handled
    there would be lost. While the block runs they come again a moment later, in the code that
    runs next; other dropped exceptions go to the previous hook."""
    previous = sys.unraisablehook

    def raised_again(unraisable):
        exc = unraisable.exc_value
        if isinstance(exc, TimeLimitExceeded):
            signal.setitimer(signal.ITIMER_REAL, 0.001, RAISE_AGAIN_S)  # off when its block ends
        elif _signal_behind(exc) is not None:
            again = threading.Timer(0.001, os.kill, (os.getpid(), _signal_behind(exc)))
            again.daemon = True  # a process already on its way out need not wait for it
            again.start()
        else:
            previous(unraisable)

    sys.unraisablehook = raised_again
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _importing(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load" and "importlib" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False
