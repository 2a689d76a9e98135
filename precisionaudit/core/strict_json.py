"""Strict JSON for machine readers: inf and nan (a -1e9 stored in fp16, a watch log's NaN loss)
become strings."""
import json
import math


def finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(document) -> str:
    return json.dumps(finite(document), indent=2, allow_nan=False, default=str) + "\n"
