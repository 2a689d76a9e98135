"""A training script, parsed once with CPython's ``ast`` for every check: its tree, its
one index (``index.Index``: parents, calls, scopes and qualified names), positions and
source text of nodes, and ``once``, the one place what several checks read is kept.

Never imported or run. A file CPython cannot parse is handed to LibCST, whose parser knows
newer syntax than the running interpreter: a file that parses there is valid but not
analysed (``NewerSyntax``); one that does not is a UsageError naming the file and the line
(one line, exit 2, and the other files of the scan are still reported). LibCST is otherwise
used only to rewrite (``--fix``), never to read.
"""
from __future__ import annotations

import ast

from ..core.errors import UsageError
from .index import Index
from .syntax import DEFS


class NewerSyntax(Exception):
    """The file parses only with a newer Python's grammar: valid, not analysed."""


class Script:
    """One parsed training script."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self.tree = parse(path, text)
        self._data = text.encode("utf-8")
        self._line_starts = [0]
        newline = self._data.find(b"\n")
        while newline >= 0:
            self._line_starts.append(newline + 1)
            newline = self._data.find(b"\n", newline + 1)
        self._analyses: dict = {}

    def once(self, analysis):
        """``analysis(self)``, computed on first use and kept: what several rules read (the
        index, the step walk, the optimizer sites, the deprecated names) is worked out once
        per script. The one cache of the training stage's analyses."""
        if analysis not in self._analyses:
            self._analyses[analysis] = analysis(self)
        return self._analyses[analysis]

    @property
    def index(self) -> Index:
        return self.once(Index)

    def names_of(self, node) -> set[str]:
        """The qualified names ``node`` may stand for (``torch.amp.GradScaler`` for ``GS``)."""
        return self.index.names_of(node)

    # -- positions and text ----------------------------------------------------------------
    def _offset(self, line: int, column: int) -> int:
        return self._line_starts[line - 1] + column

    def source(self, node) -> str:
        """``node``'s source text, exactly as written."""
        start = self._offset(node.lineno, node.col_offset)
        end = self._offset(node.end_lineno, node.end_col_offset)
        return self._data[start:end].decode("utf-8")

    def text_of(self, node) -> str:
        """``node``'s source text without parentheses around the whole (``(use_amp)`` and
        ``use_amp`` are one atom; a tuple's own parentheses go too)."""
        return unparenthesized(self.source(node).strip())

    def line_column(self, node) -> tuple[int, int]:
        """Where ``node`` starts: 1-based line and character column."""
        start = self._line_starts[node.lineno - 1]
        column = len(self._data[start:start + node.col_offset].decode("utf-8", "replace"))
        return node.lineno, column + 1

    @staticmethod
    def position(node) -> tuple[int, int]:
        """A sortable start of ``node`` (line, byte column)."""
        return node.lineno, node.col_offset

    def enclosing(self, node) -> str:
        """The functions and classes around ``node``, outermost first (``Trainer.setup``);
        "" at module level: a finding's scope."""
        names = []
        parent = self.index.parents.get(node)
        while parent is not None:
            if isinstance(parent, DEFS):
                names.append(parent.name)
            parent = self.index.parents.get(parent)
        return ".".join(reversed(names))


def parse(path: str, text: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except SyntaxError:
        pass
    except (RecursionError, MemoryError):
        raise UsageError(f"{path}: cannot parse: nested too deeply") from None
    import libcst as cst  # the arbiter of what a newer Python parses, and of the error's words

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        message = str(exc).strip().splitlines()[0]
        raise UsageError(f"{path}:{exc.raw_line}:{exc.raw_column + 1}: cannot parse: {message}") from None
    except RecursionError:
        raise UsageError(f"{path}: cannot parse: nested too deeply") from None
    raise NewerSyntax(path)


def unparenthesized(text: str) -> str:
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text  # "(a) + (b)": the first parenthesis closes early
        text = text[1:-1].strip()
    return text


def read_script(path: str) -> Script:
    """``path`` parsed; a binary or non-UTF-8 file is a UsageError, never a traceback."""
    return Script(path, read_text(path))


def read_text(path: str, encoding: str = "utf-8") -> str:
    """The text of a script or config; an unreadable, binary or non-UTF-8 file is one
    UsageError line naming it (and the line of a bad byte)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    if b"\0" in raw:
        raise UsageError(f"{path}: not a text file")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 ({exc.reason})") from None
