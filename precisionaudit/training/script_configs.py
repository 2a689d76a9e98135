"""DeepSpeed configs written as dict literals in a training script
(``deepspeed.initialize(config={"fp16": {...}, ...})``, ``ds_config = {...}``), read as a
``configs.Config`` so that the DeepSpeed checks run on them unchanged.

A value that is not a literal (``"enabled": args.fp16``) is ``UNKNOWN``: the checks treat
it as they treat "auto", and stay silent.
"""
from __future__ import annotations

import ast
import re

from .configs import DEEPSPEED_KEYS, DEEPSPEED_SECTIONS, Config
from .syntax import string


class _Unknown:
    def __repr__(self):
        return "UNKNOWN"


#: a value the script computes: no check may read anything into it
UNKNOWN = _Unknown()

_HINT = re.compile(r"""["'](?:%s)["']\s*:""" % "|".join(sorted(DEEPSPEED_KEYS | set(DEEPSPEED_SECTIONS))))


def deepspeed_dicts(script) -> list[Config]:
    """Every outermost dict literal of ``script`` that is a DeepSpeed config (a top-level
    key only DeepSpeed has, or an ``fp16``/``bf16`` section with ``enabled``), in source
    order (found once)."""
    return script.once(_deepspeed_dicts)


def _deepspeed_dicts(script) -> list[Config]:
    if not _HINT.search(script.text):  # cheap, before walking the tree
        return []
    found, claimed = [], set()
    for node in script.index.dicts:  # outer dicts come first
        if _inside(script, node, claimed):
            continue  # a section of a config already found
        keys = _literal_keys(node)
        if any(k in DEEPSPEED_KEYS for k in keys) or any(
                isinstance(keys.get(k), ast.Dict) and "enabled" in _literal_keys(keys[k]) for k in DEEPSPEED_SECTIONS):
            found.append(_as_config(script, node))
            claimed.add(node)
    return found


def _inside(script, node, claimed) -> bool:
    parent = script.index.parents.get(node)
    while parent is not None:
        if parent in claimed:
            return True
        parent = script.index.parents.get(parent)
    return False


def _literal_keys(node: ast.Dict) -> dict:
    """{key: value node} for the string-literal keys of a dict literal."""
    return {k.value: v for k, v in zip(node.keys, node.values) if string(k) is not None}


def literal_value(node):
    """A dict literal's value as Python data (its string-keyed entries, nested dicts too); a
    value the script computes is UNKNOWN."""
    if isinstance(node, ast.Dict):
        return {k: literal_value(v) for k, v in _literal_keys(node).items()}
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNKNOWN


def _as_config(script, node: ast.Dict) -> Config:
    def where(key_path):
        current, key_node = node, None
        for key in key_path:
            if not isinstance(current, ast.Dict):
                return None
            match = [(k, v) for k, v in zip(current.keys, current.values) if string(k) == key]
            if not match:
                return None
            key_node, current = match[-1]
        return script.line_column(key_node) if key_node is not None else None

    return Config(script.path, "deepspeed", literal_value(node), where)
