"""Validate a parsed file (a plan, a baseline, a rule) against a JSON Schema, in one line.

A subschema may word its own error with ``x-message``, one string or one per keyword
(``{"type": ..., "additionalProperties": ..., "*": ...}``; ``{got}``: the offending value's
type, ``{value!r}``: the value, ``{keys}``: the keys ``additionalProperties`` refuses);
otherwise jsonschema's message stands. The first error is reported where it is, as a
dotted path (``overrides[0].ops``); of several, jsonschema's best match (the
shallowest).
"""
from __future__ import annotations

import re


def schema_error(data, schema: dict) -> tuple[str, str] | None:
    """(where, why) of the first place ``data`` breaks ``schema``, or None when it conforms."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    path = list(error.absolute_path)
    key = _key_of(error)
    return _where(path + ([key] if key is not None else [])), _message(error)


def _key_of(error):
    """The key an ``additionalProperties`` error refuses or a ``required`` one misses: the
    place the message is about."""
    instance = error.instance
    if not isinstance(instance, dict):
        return None
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        return next((k for k in instance if k not in allowed), None)
    if error.validator == "required":
        return next((k for k in error.validator_value if k not in instance), None)
    return None


def _where(path) -> str:
    """``overrides[0].ops``; a key that is not a plain name is quoted (``'tests/*'``)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = part if re.fullmatch(r"[\w-]+", str(part)) else repr(part)
        out += f".{name}" if out else name
    return out


def _message(error) -> str:
    template = error.schema.get("x-message") if isinstance(error.schema, dict) else None
    if isinstance(template, dict):  # one wording per keyword: {"required": ..., "type": ...}
        template = template.get(error.validator, template.get("*"))
    if template is None:
        return error.message
    instance = error.instance
    keys = ""
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = set(error.schema.get("properties", {}))
        keys = ", ".join(sorted(str(k) for k in instance if k not in allowed))
    return template.format(got=type(instance).__name__, value=instance, keys=keys)
