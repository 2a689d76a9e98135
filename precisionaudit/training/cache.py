"""The content-hash cache of a training script's findings (ruff's ``.ruff_cache`` is the
model): an unchanged file costs a hash, not a parse.

An entry is keyed by everything its findings depend on: the package version (and, for a
source checkout whose version does not move, the training stage's source files), the
Python version (its parser), the selected training rules with their messages, fixes and
severities, the path as named, and the file's bytes. It lives in
``<cache dir>/<version>/training/<key>.json``; the settings' ``cache-dir`` moves the
directory or turns the cache off (docs/settings.md). Writes are atomic (a temporary file
renamed over the entry); an entry that cannot be read back (corrupt, truncated, from
elsewhere) is a miss, never an error; a directory that cannot be written leaves the scan
uncached.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile

from .. import __version__
from ..core.errors import UsageError
from ..core.findings import Finding

_RULE_FIELDS = ("id", "name", "message", "fix", "severity", "severity_cases", "params", "bundled")


class Cache:
    """The training findings cache under ``directory``."""

    def __init__(self, directory: str):
        self.root = directory
        self.directory = os.path.join(directory, __version__, "training")

    def key(self, path: str, text: str, rules) -> str:
        digest = hashlib.sha256()
        digest.update(f"{__version__}\0{_code_stamp()}\0{sys.version_info[0]}.{sys.version_info[1]}\0{path}\0".encode(
            "utf-8", "surrogateescape"))
        digest.update(json.dumps([[getattr(r, f) for f in _RULE_FIELDS] for r in rules], sort_keys=True,
                                 default=repr).encode())
        digest.update(b"\0" + text.encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def get(self, key: str) -> list | None:
        """The findings kept under ``key`` (None: none kept, or unreadable); a file that
        could not be parsed is its UsageError again."""
        try:
            with open(os.path.join(self.directory, key + ".json"), encoding="utf-8") as fh:
                entry = json.load(fh)
            if "error" in entry:
                raise UsageError(str(entry["error"]))
            return [Finding(**f) for f in entry["findings"]]
        except UsageError:
            raise
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def put(self, key: str, found):
        """Keep ``found`` (findings, or the UsageError of a file that does not parse) under
        ``key``, atomically; returns ``found``."""
        entry = {"error": str(found)} if isinstance(found, UsageError) else {"findings": [f.to_json() for f in found]}
        try:
            text = json.dumps(entry)
            self._prepare()
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".entry-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(temporary, os.path.join(self.directory, key + ".json"))
            except BaseException:
                os.unlink(temporary)
                raise
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written is no cache, not a failed scan
        return found

    def _prepare(self):
        if os.path.isdir(self.directory):
            return
        os.makedirs(self.directory, exist_ok=True)
        for name, text in ((".gitignore", "# made by precisionaudit\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")):
            target = os.path.join(self.root, name)
            if not os.path.exists(target):
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write(text)


@functools.lru_cache(maxsize=1)
def _code_stamp() -> str:
    """Size and modification time of every source file of the training stage: an edited
    checkout (same version) does not read results its old code wrote."""
    here = os.path.dirname(os.path.abspath(__file__))
    stamp = hashlib.sha256()
    for directory, _, names in sorted(os.walk(here)):
        for name in sorted(n for n in names if os.path.splitext(n)[1] == ".py"):
            info = os.stat(os.path.join(directory, name))
            relative = os.path.relpath(os.path.join(directory, name), here)
            stamp.update(f"{relative}:{info.st_size}:{info.st_mtime_ns};".encode())
    return stamp.hexdigest()[:16]
