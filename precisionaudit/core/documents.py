"""Reading the user's text documents (settings, plans, baselines) with one clear line for
what makes one unreadable beyond its own syntax: bytes that are not UTF-8, nesting deeper
than the parser's recursion allows (tomllib, PyYAML and json all recurse), and a path that
is not a regular file (opening a FIFO blocks until a writer comes)."""
from __future__ import annotations

import contextlib
import os
import stat

from .errors import UsageError


@contextlib.contextmanager
def reading(path: str, what: str, error=UsageError):
    """Turn the decoding and nesting failures of reading ``what`` at ``path`` into ``error``."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                    f"at offset {exc.start})") from exc
    except RecursionError as exc:
        raise error(f"{path}: the {what} is nested too deeply to read") from exc


def require_regular_file(path: str, what: str, error=UsageError, missing: str | None = None) -> None:
    """``error`` unless ``path`` is a regular file (or a symlink to one): open() would block
    on a FIFO and read forever from a device. A missing file is ``error`` with ``missing``
    as its reason, or (without it) FileNotFoundError, for the caller to word."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if missing is not None:
            raise error(f"{path}: {missing}") from None
        raise
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from exc
    if not stat.S_ISREG(mode):
        raise error(f"{path}: not a regular file; a {what} is read from a regular file")
