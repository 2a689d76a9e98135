"""A training script, parsed once with LibCST for every check: its syntax tree and the
metadata checks read (qualified names, scopes, positions, parents), resolved on first use.

Never imported or run. A file that cannot be read as Python source is a UsageError naming
the file (and the line, for a syntax error): one line, exit 2, and the other files of the
scan are still reported.
"""
from __future__ import annotations

from functools import cached_property

import libcst as cst
from libcst import metadata
from libcst.metadata.base_provider import LazyValue

from ..core.errors import UsageError


class Script:
    """One parsed training script."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            message = str(exc).strip().splitlines()[0]
            raise UsageError(f"{path}:{exc.raw_line}:{exc.raw_column + 1}: cannot parse: {message}") from None
        except RecursionError:
            raise UsageError(f"{path}: cannot parse: nested too deeply") from None
        self.wrapper = metadata.MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = self.wrapper.module
        self._analyses: dict = {}

    def once(self, analysis):
        """``analysis(self)``, computed on first use and kept: what several rules read (the
        step walk, the deprecated names, the Keras policies) is worked out once per script."""
        if analysis not in self._analyses:
            self._analyses[analysis] = analysis(self)
        return self._analyses[analysis]

    def _resolve(self, provider):
        try:
            return self.wrapper.resolve(provider)
        except RecursionError:
            raise UsageError(f"{self.path}: cannot analyse: nested too deeply") from None

    @cached_property
    def qualified_names(self):
        """node -> set of ``QualifiedName`` (``torch.amp.GradScaler`` for ``GS`` after
        ``from torch.amp import GradScaler as GS``)."""
        return self._resolve(metadata.QualifiedNameProvider)

    @cached_property
    def positions(self):
        """node -> ``CodeRange`` (1-based lines, 0-based columns)."""
        return self._resolve(metadata.PositionProvider)

    @cached_property
    def scopes(self):
        return self._resolve(metadata.ScopeProvider)

    @cached_property
    def parents(self):
        return self._resolve(metadata.ParentNodeProvider)

    def names_of(self, node) -> set[str]:
        """The qualified names ``node`` may stand for (empty when unknown)."""
        names = self.qualified_names.get(node, ())
        if isinstance(names, LazyValue):  # QualifiedNameProvider resolves each node on demand
            names = names()
        return {q.name for q in names}

    def enclosing(self, node) -> str:
        """The functions and classes around ``node``, outermost first (``Trainer.setup``);
        "" at module level: a finding's scope."""
        names = []
        parent = self.parents.get(node)
        while parent is not None:
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                names.append(parent.name.value)
            parent = self.parents.get(parent)
        return ".".join(reversed(names))

    def line_column(self, node) -> tuple[int, int]:
        """Where ``node`` starts: 1-based line and column."""
        start = self.positions[node].start
        return start.line, start.column + 1


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
