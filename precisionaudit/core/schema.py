"""Validate a parsed file (a plan, a baseline, a rule) against a JSON Schema, in one line.

A subschema may word its own error with ``x-message``, one string or one per keyword
(``{"type": ..., "additionalProperties": ..., "*": ...}``; ``{got}``: the offending value's
type, ``{value!r}``: the value, ``{keys}``: the keys ``additionalProperties`` refuses);
otherwise jsonschema's message stands. The first error is reported where it is, as a
dotted path (``overrides[0].ops``); of several, jsonschema's best match (the
shallowest).

A document that surely conforms is passed without jsonschema (``conforms``): importing it
costs a pre-commit hook more than its scan of a script; every error is still jsonschema's.
"""
from __future__ import annotations

import re


def schema_error(data, schema: dict) -> tuple[str, str] | None:
    """(where, why) of the first place ``data`` breaks ``schema``, or None when it conforms."""
    if conforms(data, schema):  # the common case, without importing jsonschema (~50 ms)
        return None
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    path = list(error.absolute_path)
    key = _key_of(error)
    return _where(path + ([key] if key is not None else [])), _message(error)


#: keywords that only annotate (``conforms`` ignores them)
_ANNOTATIONS = {"x-message", "description", "title", "default", "examples", "$comment"}
#: what a JSON Schema type holds, strictly (1.0 for "integer" and 1 == 1.0 for ``enum`` are
#: left to jsonschema)
_TYPES = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
          "integer": (int,), "number": (int, float)}


def conforms(data, schema: dict) -> bool:
    """Whether ``data`` surely conforms to ``schema``: True only where jsonschema would find
    no error; False where it breaks it, and also where a keyword or a value is beyond the
    few this checks (then jsonschema decides)."""
    if not isinstance(schema, dict) or not set(schema) <= _KEYWORDS.keys() | _ANNOTATIONS:
        return False
    return all(_KEYWORDS[k](data, v, schema) for k, v in schema.items() if k in _KEYWORDS)


def _type(data, expected, _) -> bool:
    names = [expected] if isinstance(expected, str) else expected
    return any(type(data) in _TYPES.get(name, ()) for name in names)  # bool is not an int here


def _same(data, value) -> bool:
    """jsonschema's equality, for scalars of one exact type."""
    return type(data) is type(value) and type(data) in (str, int, float, bool, type(None)) and data == value


def _properties(data, properties, _) -> bool:
    return not isinstance(data, dict) or all(conforms(data[k], s) for k, s in properties.items() if k in data)


def _additional(data, allowed, schema) -> bool:
    if not isinstance(data, dict) or allowed is True:
        return True
    extra = [v for k, v in data.items() if k not in schema.get("properties", {})]
    return not extra if allowed is False else all(conforms(v, allowed) for v in extra)


def _bound(data, holds) -> bool:
    """``minimum``/``maximum``: they judge numbers only (a bool is none)."""
    if type(data) in (int, float):
        return holds(data)
    return isinstance(data, (bool, str, list, dict, type(None)))


_KEYWORDS = {
    "type": _type,
    "enum": lambda data, values, _: any(_same(data, v) for v in values),
    "const": lambda data, value, _: _same(data, value),
    "properties": _properties,
    "additionalProperties": _additional,
    "required": lambda data, keys, _: not isinstance(data, dict) or all(k in data for k in keys),
    "items": lambda data, items, _: not isinstance(data, list) or all(conforms(v, items) for v in data),
    "anyOf": lambda data, schemas, _: any(conforms(data, s) for s in schemas),
    "minimum": lambda data, bound, _: _bound(data, lambda n: n >= bound),
    "maximum": lambda data, bound, _: _bound(data, lambda n: n <= bound),
}


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
