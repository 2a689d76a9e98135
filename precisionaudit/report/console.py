"""Where the report goes and how it looks there: colour, a progress line, an output file.

Colour and the progress line are for people at a terminal only: ``--color auto`` colours
stdout when it is a terminal and ``NO_COLOR`` is unset (https://no-color.org); the progress
line is written to stderr only when stderr is a terminal, so CI logs and pipes stay clean.
"""
from __future__ import annotations

import os
import sys

import click

from ..core.atomic import write_text_atomic


def _is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def color_enabled(choice: str, stream=None, to_file: bool = False) -> bool:
    """``--color``: always, never, or auto (a terminal, no ``NO_COLOR``, not a file)."""
    if choice == "always":
        return True
    if choice == "never" or to_file or os.environ.get("NO_COLOR"):
        return False
    return _is_terminal(stream or sys.stdout)


class Progress:
    """``[3/45] scanning models/x.py`` on one rewritten stderr line, only on a terminal."""

    def __init__(self, total: int, stream=None):
        self.stream = stream or sys.stderr
        self.total, self.width = total, 0
        self.enabled = _is_terminal(self.stream)

    def update(self, index: int, path: str) -> None:
        if not self.enabled:
            return
        text = f"[{index}/{self.total}] scanning {path}"
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class Output:
    """stdout, written as it comes (streamed), or ``--output-file``, written once at the
    end, atomically, and only when there is a report (never a half-written file)."""

    def __init__(self, path: str | None, color: bool):
        """``path``: already checked (``core.outputs.checked_output``), before the scan."""
        self.path, self.color, self.parts = path, color, []

    def write(self, text: str) -> None:
        if self.path is None:
            click.echo(text, nl=False, color=self.color)
        else:
            self.parts.append(text)

    def close(self) -> None:
        if self.path is not None and self.parts:
            write_text_atomic(self.path, "".join(self.parts), "report")
