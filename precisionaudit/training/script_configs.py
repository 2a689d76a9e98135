"""DeepSpeed configs written as dict literals in a training script
(``deepspeed.initialize(config={"fp16": {...}, ...})``, ``ds_config = {...}``), read as a
``configs.Config`` so that the DeepSpeed checks run on them unchanged.

A value that is not a literal (``"enabled": args.fp16``) is ``UNKNOWN``: the checks treat
it as they treat "auto", and stay silent.
"""
from __future__ import annotations

import ast
import re

import libcst as cst

from .configs import DEEPSPEED_KEYS, DEEPSPEED_SECTIONS, Config


class _Unknown:
    def __repr__(self):
        return "UNKNOWN"


#: a value the script computes: no check may read anything into it
UNKNOWN = _Unknown()

_HINT = re.compile(r"""["'](?:%s)["']\s*:""" % "|".join(sorted(DEEPSPEED_KEYS | set(DEEPSPEED_SECTIONS))))


def deepspeed_dicts(script) -> list[Config]:
    """Every outermost dict literal of ``script`` that is a DeepSpeed config (a top-level
    key only DeepSpeed has, or an ``fp16``/``bf16`` section with ``enabled``)."""
    if not _HINT.search(script.text):  # cheap, before walking the tree
        return []
    found = []

    class Dicts(cst.CSTVisitor):
        def visit_Dict(self, node):
            keys = _literal_keys(node)
            if any(k in DEEPSPEED_KEYS for k in keys) or any(
                    isinstance(keys.get(k), cst.Dict) and "enabled" in _literal_keys(keys[k])
                    for k in DEEPSPEED_SECTIONS):
                found.append(_as_config(script, node))
                return False  # its inner dicts are its sections
            return True

    script.module.visit(Dicts())
    return found


def _literal_keys(node: cst.Dict) -> dict:
    """{key: value node} for the string-literal keys of a dict literal."""
    keys = {}
    for element in node.elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
            keys[element.key.evaluated_value] = element.value
    return keys


def _as_config(script, node: cst.Dict) -> Config:
    def value_of(value):
        if isinstance(value, cst.Dict):
            return {k: value_of(v) for k, v in _literal_keys(value).items()}
        try:
            return ast.literal_eval(script.module.code_for_node(value).strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return UNKNOWN

    def where(key_path):
        current = node
        key_node = None
        for key in key_path:
            if not isinstance(current, cst.Dict):
                return None
            match = [e for e in current.elements if isinstance(e, cst.DictElement)
                     and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key]
            if not match:
                return None
            key_node, current = match[-1].key, match[-1].value
        return script.line_column(key_node) if key_node is not None else None

    return Config(script.path, "deepspeed", value_of(node), where)
