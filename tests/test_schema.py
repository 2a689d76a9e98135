"""core/schema.py's ``conforms``: the check that lets a valid settings file, baseline or plan
pass without importing jsonschema. It may say True only where jsonschema finds no error
(else an error would go unreported); for the settings and baselines, whose keywords it
knows, it must say so for every valid document (else the import is not saved)."""
import jsonschema
import pytest
from conftest import imported_by_a_scan
from fuzz_cases import BASELINES, CONFIGS, PLANS
from hypothesis import HealthCheck, given, settings

from precisionaudit.core.schema import conforms
from precisionaudit.plan.file import SCHEMA as PLAN_SCHEMA
from precisionaudit.rules.schema import RULE_SCHEMA
from precisionaudit.settings.baseline import SCHEMA as BASELINE_SCHEMA
from precisionaudit.settings.config import SCHEMA as SETTINGS_SCHEMA

MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid(data, schema) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(data)


@MANY
@given(CONFIGS)
def test_settings_conform_exactly_where_jsonschema_finds_no_error(data):
    assert conforms(data, SETTINGS_SCHEMA) == valid(data, SETTINGS_SCHEMA)


@MANY
@given(BASELINES)
def test_baselines_conform_exactly_where_jsonschema_finds_no_error(data):
    assert conforms(data, BASELINE_SCHEMA) == valid(data, BASELINE_SCHEMA)


@MANY
@given(PLANS)
def test_a_plan_conforms_only_where_jsonschema_finds_no_error(data):
    assert not conforms(data, PLAN_SCHEMA) or valid(data, PLAN_SCHEMA)


@pytest.mark.parametrize("data", [
    {"select": "PA4", "ignore": ["PA401"], "per-file-ignores": {"tests/*": "PA1"}, "cache-dir": False},
    {"suppress": [{"rule": "PA402", "path": "*.py", "reason": "ok"}], "severity": {"PA401": "info"}},
    {"fail-on": "warning", "dtype": "bfloat16", "mode": "pure", "device": "cpu", "baseline": "b.json",
     "rule-packs": ["packs"], "pythonpath": ["src"], "cache-dir": ".cache"},
    {},
])
def test_a_valid_settings_table_conforms(data):
    assert valid(data, SETTINGS_SCHEMA) and conforms(data, SETTINGS_SCHEMA)


@pytest.mark.parametrize("data, schema", [
    (True, {"type": "integer"}),  # a bool is no number to JSON Schema
    (1, {"enum": [True]}),
    (True, {"const": 1}),
    ([1], {"enum": [[True]]}),
    ({"a": 1}, {"additionalProperties": False}),
    ({"a": "x"}, {"properties": {"b": {}}, "additionalProperties": {"type": "integer"}}),
    ({}, {"required": ["a"]}),
    ("x", {"anyOf": [{"type": "integer"}, {"enum": ["y"]}]}),
    (3, {"maximum": 2}),
])
def test_what_breaks_a_schema_does_not_conform(data, schema):
    assert not valid(data, schema) and not conforms(data, schema)


@pytest.mark.parametrize("data, schema", [
    (1.0, {"type": "integer"}),  # valid, but left to jsonschema
    (1.0, {"const": 1}),
    ("ab", {"type": "string", "pattern": "a"}),  # a keyword conforms does not know
])
def test_what_it_cannot_tell_is_left_to_jsonschema(data, schema):
    assert valid(data, schema) and not conforms(data, schema)


def test_the_rule_schema_is_left_to_jsonschema():
    """Its keywords (pattern, oneOf, ...) are beyond conforms: a rule pack's file is always
    checked by jsonschema (and the bundled pack by the test suite)."""
    assert not conforms({"id": "EX101"}, RULE_SCHEMA)


def test_a_scan_with_a_valid_settings_file_does_not_import_jsonschema(tmp_path):
    (tmp_path / "precisionaudit.toml").write_text(
        'select = ["PA4"]\ncache-dir = "cache"\n[severity]\nPA401 = "warning"\n'
        '[[suppress]]\nrule = "PA402"\npath = "*.py"\n')
    (tmp_path / "train.py").write_text("x = 1\n")
    assert imported_by_a_scan(tmp_path, "train.py", modules=["jsonschema"]) == "0 []"
    (tmp_path / "precisionaudit.toml").write_text('select = "PA4"\ndtype = 16\n')  # jsonschema words it
    assert imported_by_a_scan(tmp_path, "train.py", modules=["jsonschema"]) == "2 ['jsonschema']"
