"""Where the keys of a JSON document are: the stdlib ``json`` module gives values, not
positions, and a finding about a DeepSpeed config must point at its key.

``key_offset`` finds one key path by walking down it: at each level it reads the keys with
json's own string scanner and steps over the values it does not want with json's C
decoder (``raw_decode``), so the cost is one C pass over what precedes the key, and the
Python loop runs once per sibling on the path, not once per token of the file.
``first_repeated_key`` finds a key repeated in one object, which only a full pass can
(one regular expression over the text, an explicit stack: no recursion).
Both need text that ``json.loads`` already accepted: they follow the structure, they do
not validate it.
"""
from __future__ import annotations

import re

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]', re.DOTALL)
_BLANK = re.compile(r"[ \t\n\r]*")


def key_offset(text: str, path) -> int | None:
    """The offset of the last key of ``path`` (object keys and array indexes) in ``text``,
    None if absent. A repeated key resolves to its first occurrence (``read_config``
    refuses repeated keys, as DeepSpeed does)."""
    import json

    decoder, scan = json.JSONDecoder(), json.decoder.scanstring
    pos = _BLANK.match(text, 0).end()
    found = None
    for want in path:
        if pos >= len(text) or text[pos] not in "{[":
            return None
        is_object = text[pos] == "{"
        pos = _BLANK.match(text, pos + 1).end()
        index, found = 0, None
        while text[pos] not in "}]":
            if is_object:
                key_at = pos
                key, pos = scan(text, pos + 1)
                pos = _BLANK.match(text, _BLANK.match(text, pos).end() + 1).end()  # past ':'
                if key == want:
                    found = key_at
                    break
            elif index == want:
                found = pos
                break
            pos = _BLANK.match(text, decoder.raw_decode(text, pos)[1]).end()
            if text[pos] == ",":
                pos = _BLANK.match(text, pos + 1).end()
            index += 1
        if found is None:
            return None
    return found


def first_repeated_key(text: str) -> tuple[str, int] | None:
    """(key, offset of its second occurrence) for the first key repeated within one
    object, None if none is. One regular-expression pass with an explicit stack of the
    open containers' keys: no recursion, whatever the depth."""
    import json

    decode = json.decoder.scanstring
    stack: list[list] = []  # per open container: [keys seen (None: an array), expecting a key]
    for match in _TOKEN.finditer(text):
        first = text[match.start()]
        if first in "{[":
            stack.append([set() if first == "{" else None, first == "{"])
        elif first in "}]":
            stack.pop()
        elif first == ",":
            stack[-1][1] = stack[-1][0] is not None
        elif stack and stack[-1][1]:  # a string where a key is expected
            key = decode(match.group(), 1)[0]
            if key in stack[-1][0]:
                return key, match.start()
            stack[-1][0].add(key)
            stack[-1][1] = False
    return None


def line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
