"""Reading the user's text documents (settings, plans, baselines) with one clear line for
what makes one unreadable beyond its own syntax: bytes that are not UTF-8, and nesting
deeper than the parser's recursion allows (tomllib, PyYAML and json all recurse)."""
from __future__ import annotations

import contextlib

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
