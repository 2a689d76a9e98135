"""Where each key of a JSON document is: the stdlib ``json`` module gives values, not
positions, and a finding about a DeepSpeed config must point at its key.

One pass over the text with one regular expression (strings and the six structural
characters; numbers, literals and blanks are skipped by the search), with an explicit
stack: no recursion, so depth costs nothing, and a 10 MB file is one C-level regex walk.
The text must already be valid JSON (``json.loads`` checked it): the scanner does not
validate, it only follows the structure.
"""
from __future__ import annotations

import bisect
import re

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]', re.DOTALL)


class KeyPositions:
    """Offsets of the keys of one JSON text, by key path (``("fp16", "loss_scale")``).

    Containers are numbered in the order they open; ``_child[(container, key)]`` is the
    container a key (or array index) holds, ``_key[(container, key)]`` the key's offset.
    Memory is one entry per key, whatever the depth. A repeated key keeps its last
    occurrence, as ``json.loads`` keeps the last value.
    """

    def __init__(self, text: str):
        self.text = text
        self._key: dict = {}
        self._child: dict = {}
        self.duplicates: list[tuple[tuple, int]] = []  # (container, key) offsets seen twice
        self._newlines: list[int] | None = None
        self._scan()

    def _scan(self) -> None:
        import json

        decode = json.decoder.scanstring
        stack: list[list] = []  # [container id, is_object, expecting_key, pending key]
        count = 0
        for match in _TOKEN.finditer(self.text):
            token = match.group()
            first = token[0]
            if first in "{[":
                container = count
                count += 1
                if stack:
                    top = stack[-1]
                    self._child[(top[0], top[3])] = container
                stack.append([container, first == "{", first == "{", 0 if first == "[" else None])
            elif first in "}]":
                stack.pop()
            elif first == ",":
                top = stack[-1]
                if top[1]:
                    top[2] = True
                else:
                    top[3] += 1
            elif first == '"' and stack and stack[-1][2]:
                top = stack[-1]
                key = decode(token, 1)[0]
                slot = (top[0], key)
                if slot in self._key:
                    self.duplicates.append((slot, match.start()))
                self._key[slot] = match.start()
                top[2], top[3] = False, key
            # ':' and string values need nothing

    def offset(self, path) -> int | None:
        """The offset of the last key of ``path`` (keys and array indexes), None if absent."""
        container = 0
        for i, key in enumerate(path):
            slot = (container, key)
            if i == len(path) - 1:
                return self._key.get(slot)
            container = self._child.get(slot)
            if container is None:
                return None
        return None

    def line_column(self, offset: int) -> tuple[int, int]:
        """1-based line and column of ``offset``."""
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_left(self._newlines, offset)
        start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, offset - start + 1
