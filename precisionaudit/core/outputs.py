"""Where a command may write: never onto one of its own inputs, only onto a regular file.

``plan -o``, ``scan --write-baseline`` and ``convert -o`` replace their target with a
renamed temporary file. Pointed at the model being read, that destroys it; pointed at a
device node, a FIFO or a directory (or a symlink to one), it would replace the node with
a plain file. Each target is checked here before any work is done.
"""
from __future__ import annotations

import os
import stat

from .errors import UsageError


def checked_output(path: str, inputs, what: str) -> str:
    """The path to write ``what`` to (a symlink resolved to its target), or a UsageError."""
    if not path or "\0" in path:
        raise UsageError(f"{path!r}: not a valid {what} path")
    real = os.path.realpath(path)
    for source in inputs:
        if source and _same_file(real, source):
            raise UsageError(f"{path}: the {what} would overwrite {source}, which this command reads")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{path}: cannot write {what}: {exc.strerror}") from exc
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"{path}: is a directory; give the {what} a file name")
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{path}: not a regular file; the {what} is only written to a regular file")
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: cannot write {what}: folder {os.path.dirname(path) or '.'} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{path}: cannot write {what}: folder {os.path.dirname(path) or '.'} is not writable")
    return real


def _same_file(real: str, source: str) -> bool:
    if os.path.realpath(source) == real:
        return True
    try:
        return os.path.samefile(real, source)  # hard links
    except OSError:
        return False
