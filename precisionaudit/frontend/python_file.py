"""What a Python file is, read with ``ast`` and never imported: whether it is a model file
(it defines the model factory), and whether it imports keras.

A model file is what pytest would call a test: its module level defines the entry
(``--entry``, default ``get_model``) as a function that can be called with no arguments
(no required parameter; not a method, not nested in a function), or binds the name by an
assignment (``get_model = partial(build, cfg)``). Library helpers of the same name
(``get_model(cfg_path, pretrained=False)``, ``def get_model(self)`` in a class) make a file a
training script or nothing, as any other Python file: it is never imported. Definitions
inside module-level ``if``/``try``/``with`` blocks count as module level (they run at import).

Each file is parsed once per content (the cache is keyed by path, size and modification
time): a scan asks several frontends about the same file.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import stat
from dataclasses import dataclass, field

from ..core.errors import UsageError

#: statements whose bodies run at import, as the module's own
_BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.AsyncWith, ast.AsyncFor)


@dataclass(frozen=True)
class Definition:
    """One binding of a name: where, and what it makes of the name."""

    line: int
    kind: str  # "factory", "assigned", "needs arguments", "async", "method", "nested"
    detail: str = ""  # the parameters, or the class / function it sits in


@dataclass(frozen=True)
class PythonFile:
    #: name -> its last module-level binding (a def or an assignment)
    module_level: dict = field(default_factory=dict)
    #: name -> its first definition inside a class or a function
    inside: dict = field(default_factory=dict)
    imports_keras: bool = False
    syntax_error: str | None = None  # "LINE: syntax error: ..." when the file does not parse
    #: a file that does not parse: the names its text defines with ``def``
    defs_in_text: frozenset = frozenset()

    def defines_factory(self, entry: str) -> bool:
        """Whether the module level makes ``entry`` a model factory (callable without
        arguments). A file that does not parse is one when its text defines the entry: the
        import then says where the syntax error is, as it would for any model file."""
        if self.syntax_error:
            return entry in self.defs_in_text
        found = self.module_level.get(entry)
        return found is not None and found.kind in ("factory", "assigned")

    def why_not(self, path: str, entry: str) -> str:
        """One line: why the file is not a model file with this entry."""
        how = "(use --entry to name the model factory)"
        if self.syntax_error:
            return f"{path}:{self.syntax_error}"
        found = self.module_level.get(entry)
        if found is not None and found.kind == "needs arguments":
            return (f"{path}:{found.line}: {entry}({found.detail}) needs arguments; a model file's "
                    f"{entry}() is called with none {how}")
        if found is not None and found.kind == "async":
            return f"{path}:{found.line}: {entry}() is a coroutine function, not a model factory {how}"
        found = self.inside.get(entry)
        if found is not None:
            where = "a method of" if found.kind == "method" else "defined inside"
            return (f"{path}:{found.line}: {entry}() is {where} {found.detail}, not a module-level "
                    f"function {how}")
        return f"{path}: no function {entry}() {how}"


def read_python(path: str) -> PythonFile:
    """The facts of the Python file at ``path`` (a UsageError when it cannot be read)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read
        raise UsageError(f"{path}: not a regular file")
    try:
        return _read(os.path.abspath(path), info.st_size, info.st_mtime_ns)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc


@functools.lru_cache(maxsize=512)
def _read(path: str, size: int, mtime_ns: int) -> PythonFile:
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: NUL bytes
        line = getattr(exc, "lineno", None) or 1
        message = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        return PythonFile(syntax_error=f"{line}: syntax error: {message}",
                          defs_in_text=frozenset(re.findall(r"\bdef\s+(\w+)\s*\(", text)))
    module_level, inside = {}, {}
    _module_level(tree.body, module_level, inside)
    return PythonFile(module_level, inside, _imports_keras(tree, text))


def _module_level(body, found: dict, inside: dict) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = _function(node)
            _inside(node, f"function {node.name}()", inside)
        elif isinstance(node, ast.ClassDef):
            _inside(node, f"class {node.name}", inside)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and (node.value is not None):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in _names(targets):
                found[name] = Definition(node.lineno, "assigned")
        elif isinstance(node, _BLOCKS):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *[h.body for h in getattr(node, "handlers", [])]):
                _module_level(block, found, inside)


def _function(node) -> Definition:
    if isinstance(node, ast.AsyncFunctionDef):
        return Definition(node.lineno, "async")
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    required = positional[:len(positional) - len(args.defaults)]
    required += [a for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    if required:
        return Definition(node.lineno, "needs arguments", ast.unparse(args))
    return Definition(node.lineno, "factory")


def _inside(owner, where: str, inside: dict) -> None:
    """The functions defined in a class (methods) or a function (nested), first one of a name."""
    kind = "method" if isinstance(owner, ast.ClassDef) else "nested"
    for node in ast.walk(owner):
        if node is not owner and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.setdefault(node.name, Definition(node.lineno, kind, where))


def _names(targets):
    for target in targets:
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, (ast.Tuple, ast.List)):
            yield from _names(target.elts)


def _imports_keras(tree, text: str) -> bool:
    """Whether the file imports keras, or imports TensorFlow and names keras (``tf.keras``: a
    PyTorch model file may import TensorFlow for other things, TensorBoard's summaries)."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module.split(".")[0])
    return "keras" in modules or ("tensorflow" in modules and "keras" in text)
