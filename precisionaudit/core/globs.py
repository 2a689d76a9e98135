"""The one glob over dotted paths (``blocks.0.attn``), for plans and ``[[suppress]]`` patterns.

``*`` matches exactly one dotted component (``blocks.*.attn`` matches ``blocks.3.attn``,
not ``blocks.3.inner.attn``), ``**`` any number of components, none included
(``blocks.**.attn`` matches both and ``blocks.attn``); inside a component ``*``, ``?`` and
``[...]`` work as in fnmatch (``att*`` matches ``attn``). The root module is ``""`` and only
the empty pattern matches it.

Matching is a dynamic programme over components (pattern × path), so a pattern full of
``**`` costs time proportional to the product of the two lengths, never exponential.
"""
from __future__ import annotations

import fnmatch
import functools
import re


@functools.lru_cache(maxsize=1024)
def _component(pattern: str):
    """A compiled matcher for one component pattern (no dots inside)."""
    return re.compile(fnmatch.translate(pattern)).match


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> tuple:
    """Pattern components, with runs of ``**`` folded into one (they mean the same)."""
    parts = []
    for part in pattern.split("."):
        if part == "**" and parts and parts[-1] == "**":
            continue
        parts.append(part)
    return tuple(parts)


def matches(pattern: str, path: str | None) -> bool:
    """Whether the dotted ``path`` matches the glob ``pattern``."""
    path = path or ""
    if pattern == "" or path == "":
        return pattern == path
    parts = _compile(pattern)
    names = path.split(".")
    # reachable[j]: the pattern components consumed so far can match names[:j]
    reachable = [True] + [False] * len(names)
    for part in parts:
        if part == "**":  # any j' >= some reachable j
            seen = False
            for j in range(len(names) + 1):
                seen = seen or reachable[j]
                reachable[j] = seen
        else:
            match = _component(part)
            reachable = [False] + [reachable[j] and match(names[j]) is not None for j in range(len(names))]
        if not any(reachable):
            return False
    return reachable[-1]
