"""The bundled rule pack's parsed YAML, kept as Python keeps bytecode: a command then reads
the catalog from one marshal file (~1 ms) instead of importing PyYAML (~10 ms) and parsing
60-odd files (~8 ms), which is most of what a pre-commit hook's scan of one script costs
beyond Python's own start.

The YAML stays the one source. The kept copy is keyed by each rule file's name, size and
modification time and by PyYAML's own module file (an upgrade rewrites it); a copy that
does not match, or cannot be read, is parsed again from the YAML. It is written where
Python writes the pack's bytecode (``__pycache__`` beside it, or under
``sys.pycache_prefix``), never where Python writes none (``PYTHONDONTWRITEBYTECODE``), and a
place that cannot be written leaves it unwritten.
"""
from __future__ import annotations

import importlib.util
import marshal
import os
import sys


def kept_documents(directory: str, names: list[str], parse) -> list:
    """``parse()`` (the parsed rule files ``names`` of ``directory``), or the copy kept from
    the last time these files were parsed."""
    key = _key(directory, names)
    path = _kept_path(directory)
    if path is None:
        return parse()
    try:
        with open(path, "rb") as fh:
            kept_key, documents = marshal.load(fh)
        if kept_key == key:
            return documents
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none kept yet, or not one this can read: parsed again
    documents = parse()
    if not sys.dont_write_bytecode:
        _keep(path, key, documents)
    return documents


def _key(directory: str, names: list[str]) -> tuple:
    files = []
    for name in names:
        info = os.stat(os.path.join(directory, name))
        files.append((name, info.st_size, info.st_mtime_ns))
    spec = importlib.util.find_spec("yaml")
    origin = spec.origin if spec is not None and spec.origin else None
    loader = os.stat(origin) if origin else None
    return tuple(files), ((origin, loader.st_size, loader.st_mtime_ns) if loader else None)


def _kept_path(directory: str) -> str | None:
    """Where the copy of ``directory``'s catalog is kept: its bytecode's folder."""
    try:
        bytecode = importlib.util.cache_from_source(os.path.join(os.path.abspath(directory), "rules.py"))
    except NotImplementedError:  # an interpreter that keeps no bytecode
        return None
    return os.path.join(os.path.dirname(bytecode), f"rule-catalog.{sys.implementation.cache_tag}.marshal")


def _keep(path: str, key: tuple, documents: list) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        data = marshal.dumps((key, documents))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as fh:
            fh.write(data)
        os.replace(temporary, path)
    except (OSError, ValueError):  # ValueError: a value marshal cannot hold (a YAML date)
        try:
            os.unlink(temporary)
        except OSError:
            pass
