"""What a rule file may say: the JSON Schema every rule YAML (bundled or from a pack) meets.

Severities and thresholds are data here, not prose: ``severity_cases`` names the cases a
check can report (with the severity each gets and when it applies, worded from
``params``), and ``params`` holds the numbers a check reads through ``registry.param``.
"""
from __future__ import annotations

from ..core.findings import FIX_ACTIONS, SEVERITIES
from ..core.target import DTYPES, MODES, TARGET_DTYPES

_TEXT = {"type": "string", "minLength": 1}

RULE_SCHEMA = {
    "type": "object",
    "required": ["id", "name", "summary", "severity", "message", "doc"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]+[0-9]+$"},
        "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
        "summary": _TEXT,
        "severity": {"oneOf": [
            {"enum": list(SEVERITIES)},
            {"type": "object", "minProperties": 1, "additionalProperties": {"enum": list(SEVERITIES)},
             "propertyNames": {"enum": ["default", *DTYPES]}}]},
        "severity_cases": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["severity", "when"], "additionalProperties": False,
            "properties": {"severity": {"enum": list(SEVERITIES)}, "when": _TEXT}}},
        "params": {"type": "object", "additionalProperties": {"type": ["number", "string", "boolean", "array"]}},
        "match": {"type": "object", "additionalProperties": False, "properties": {
            "ops": {"type": "array", "items": {"type": "string"}},
            "where": {"type": "object"}}},
        "check": {"type": "string"},
        # measurement: found by a run, not by a scan (check --train's PA304-PA306); the scan skips it
        # watch: found in the user's own training job by precisionaudit.watch (PA7xx, `watch DIR`)
        "scope": {"enum": ["node", "graph", "source", "training", "measurement", "watch"]},
        "needs_inputs": {"type": "boolean"},
        "modes": {"type": "array", "minItems": 1, "items": {"enum": list(MODES)}},
        # the --dtype targets the rule judges (left out: every one); float8 rules judge FP8 GEMMs
        "targets": {"type": "array", "minItems": 1, "items": {"enum": list(TARGET_DTYPES)}},
        "message": _TEXT,
        "fix": {"type": "object", "required": ["action"], "properties": {"action": {"enum": list(FIX_ACTIONS)}}},
        "doc": {"type": "object", "required": ["what", "why"], "additionalProperties": False,
                # notes: the sources behind the rule (kernel files, cuBLAS/cuDNN facts)
                "properties": {k: _TEXT for k in ("what", "why", "bad", "good", "notes")}},
    },
}
