"""Property tests (hypothesis) of the readers of user documents (issue 11): whatever a plan
or a settings table holds, reading it returns a plan/config or raises the one-line error
type (PlanError / UsageError), never anything else."""
import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precisionaudit.core.errors import UsageError
from precisionaudit.plan.file import SCHEMA, PlanError, parse_plan, parse_text
from precisionaudit.settings.config import _parse

WORDS = ["float16", "bfloat16", "float32", "autocast", "pure", "cuda", "cpu", "PA1", "PA101", "ALL", "",
         "error", "warning", "info", "*", "**", "blocks.*.attn", "Softmax", "Cast", "module", "ops"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.sampled_from(WORDS), st.text(string.printable, max_size=8))
ENTRY_KEYS = ["module", "nodes", "op_types", "ops", "dtype", "rules", "reason"]
PLAN_KEYS = st.one_of(st.sampled_from([*SCHEMA["properties"], *ENTRY_KEYS, "mode", "device"]),
                      st.integers(-3, 3), st.text(max_size=4))
CONFIG_KEYS = st.one_of(st.sampled_from(["select", "ignore", "extend-select", "per-file-ignores",
                                         "severity", "suppress", "fail-on", "dtype", "mode", "device",
                                         "baseline", "rule", "path", "module", "node", "op", "reason",
                                         "tool", "PA101", "*.py"]), st.text(max_size=4))


def values(keys):
    return st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)), max_leaves=20)


PLANS = st.one_of(values(PLAN_KEYS), st.fixed_dictionaries(
    {"version": st.sampled_from([1, True, 1.0, "1", None])},
    optional={"target": values(PLAN_KEYS), "overrides": st.lists(values(PLAN_KEYS), max_size=3),
              "keep_fp32_modules": values(PLAN_KEYS)}))
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(PLANS)
def test_any_plan_data_is_a_plan_or_a_plan_error(data):
    try:
        plan = parse_plan(data, "plan.yaml")
    except PlanError:
        return
    assert plan.version == 1 and type(plan.version) is int


@FAST
@given(PLANS)
def test_any_plan_text_is_a_plan_or_a_plan_error(data):
    try:
        text = yaml.safe_dump(data)
    except yaml.YAMLError:
        return
    try:
        parse_text(text, "plan.yaml")
    except PlanError:
        pass


@FAST
@given(st.dictionaries(CONFIG_KEYS, values(CONFIG_KEYS), max_size=6))
def test_any_settings_table_is_a_config_or_a_usage_error(data):
    try:
        _parse("/p/precisionaudit.toml", data, "", {"PA001", "PA101", "PA106", "PA201"})
    except UsageError:
        pass
