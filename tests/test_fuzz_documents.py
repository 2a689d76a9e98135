"""Property tests (hypothesis) of the readers of user documents (issue 11): whatever a plan
or a settings table holds, reading it returns a plan/config or raises the one-line error
type (PlanError / UsageError), never anything else."""
import yaml
from fuzz_cases import CONFIGS, PLANS
from hypothesis import HealthCheck, given, settings

from precisionaudit.core.errors import UsageError
from precisionaudit.plan.file import PlanError, parse_plan, parse_text
from precisionaudit.settings.config import _parse

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
@given(CONFIGS)
def test_any_settings_table_is_a_config_or_a_usage_error(data):
    try:
        _parse("/p/precisionaudit.toml", data, "", {"PA001", "PA101", "PA106", "PA201"})
    except UsageError:
        pass
