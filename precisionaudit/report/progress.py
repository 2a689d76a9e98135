"""Progress of long runs (``check``, ``plan --prune``) on stderr: which run, how long so far.

Only for a person watching: off when stderr is not a terminal (CI logs, pipes, click's
test runner), so scripted output never changes.
"""
from __future__ import annotations

import sys
import time


def progress_printer(stream=None):
    """A ``progress(message)`` callable writing ``precisionaudit: [12.3 s] message`` lines to
    ``stream`` (stderr) when it is a terminal, else None (no progress)."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return None
    started = time.perf_counter()

    def show(message: str) -> None:
        stream.write(f"precisionaudit: [{time.perf_counter() - started:5.1f} s] {message}\n")
        stream.flush()

    return show
