"""PA423 deepspeed-static-loss-scale: distributed precision settings (FSDP policies, DeepSpeed
configs). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""

import pytest
from precisionaudit.frontend.training import audit as audit_file
from training_rules import DISTRIBUTED, assert_page_examples, config, key_line, marked, sample, twins, write

dist_found = DISTRIBUTED.findings


@pytest.mark.parametrize("name", ['pa423_deepspeed_dict_hazard.py'])
def test_a_hazard_script_gives_its_findings_on_the_marked_lines(name):
    path = sample(name)
    assert sorted(dist_found(path)) == sorted(marked(path)) != []


@pytest.mark.parametrize("name,expected", [
    ("pa423_deepspeed_static_loss_scale_hazard.json", [("PA423", "loss_scale")]),
    ("pa423_both_enabled_hazard.json", [("PA423", "bf16")])])
def test_a_hazard_config_gives_its_findings_on_the_keys_lines(name, expected):
    path = sample(name)
    assert sorted(dist_found(path)) == sorted((rule, key_line(path, key)) for rule, key in expected)


def test_the_clean_twins_give_no_finding_and_every_case_is_rendered():
    assert [dist_found(sample(n)) for n in twins("pa423")] == [[] for _ in twins("pa423")]
    assert DISTRIBUTED.cases("pa423") == {("PA423", "warning"), ("PA423", "error")}


def test_the_severity_follows_the_case():
    names = ("pa423_both_enabled_hazard.json", "pa423_deepspeed_static_loss_scale_hazard.json")
    found = {f.op: f.severity for name in names
             for f in audit_file(sample(name), DISTRIBUTED.rules)}
    assert found == {"bf16.enabled": "error", "fp16.loss_scale": "warning"}


@pytest.mark.parametrize("fp16,bf16,expected", [
    ('{"enabled": true, "loss_scale": 1}', None, "fp16.loss_scale"),
    ('{"enabled": true, "loss_scale": 0.5}', None, "fp16.loss_scale"),
    ('{"enabled": "true", "loss_scale": "1"}', None, "fp16.loss_scale"),  # pydantic coerces both
    ('{"enabled": true, "loss_scale": 0}', None, None),  # 0 is dynamic loss scaling
    ('{"enabled": true}', None, None),  # the default is 0
    ('{"enabled": true, "loss_scale": 1024}', None, None),  # a static scale that scales
    ('{"enabled": false, "loss_scale": 1}', None, None),
    ('{"enabled": "auto", "loss_scale": 1}', None, None),  # the HF integration decides
    ('{"enabled": true, "loss_scale": "auto"}', None, None),
    ('{"enabled": true}', '{"enabled": true}', "bf16.enabled"),
    ('{"enabled": true, "loss_scale": 1}', '{"enabled": true}', "bf16.enabled"),  # one finding, the error
    ('{"enabled": true}', '{"enabled": "auto"}', None),
    ('{"enabled": "auto"}', '{"enabled": true}', None),
])
def test_pa423_reads_fp16_as_deepspeed_does(tmp_path, fp16, bf16, expected):
    text = '{"train_batch_size": 8, "fp16": ' + fp16 + (', "bf16": ' + bf16 if bf16 else "") + "}"
    found = [f.op for f in audit_file(config(tmp_path, text), DISTRIBUTED.rules) if f.rule == "PA423"]
    assert found == ([expected] if expected else [])


def test_pa423_knows_bf16s_old_name(tmp_path):
    text = '{\n "train_batch_size": 8,\n "fp16": {"enabled": true},\n "bfloat16": {\n  "enabled": true}\n}'
    (finding,) = audit_file(config(tmp_path, text), DISTRIBUTED.rules)
    assert (finding.op, finding.line, finding.column) == ("bfloat16.enabled", 5, 3)


@pytest.mark.parametrize("code,expected", [
    ('cfg = {"train_batch_size": 8, "communication_data_type": "bf16"}', [("PA421", 2)]),
    ('cfg = {"fp16": {"enabled": True, "loss_scale": 1.0}}', [("PA423", 2)]),
    ('cfg = {"fp16": {"enabled": True}, "bf16": {"enabled": True}}', [("PA423", 2)]),
    ('cfg = {"fp16": {"enabled": use_fp16, "loss_scale": 1}}', []),  # computed: unknown
    ('cfg = {"fp16": {"enabled": True, "loss_scale": scale}}', []),
    ('hp = {"lr": 1e-4, "fp16": True, "data_types": {"grad_accum_dtype": "bf16"}}', []),  # not DeepSpeed's
    ('cfg = {"train_batch_size": 8, "communication_data_type": "bf16".upper()}', []),  # computed
    ('cfg = {"zero_optimization": {"stage": 2}, "fp16": {"enabled": True, "loss_scale": 0}}', []),
])
def test_deepspeed_configs_written_in_a_script_are_read_like_json(tmp_path, code, expected):
    assert dist_found(write(tmp_path, "import deepspeed\n" + code + "\n")) == expected


def test_a_key_of_a_script_config_is_found_at_its_column(tmp_path):
    path = write(tmp_path, 'import deepspeed\nc = {\n    "fp16": {\n        "enabled": True, "loss_scale": 1}}\n')
    (finding,) = audit_file(path, DISTRIBUTED.rules)
    assert (finding.line, finding.column, finding.op) == (4, 26, "fp16.loss_scale")


def test_an_accelerate_config_is_read_and_reported_on_only_when_it_parses(tmp_path):
    """accelerate has no config key for FSDP's reduce dtype (its FSDP plugin makes
    MixedPrecision(param_dtype=bf16, reduce_dtype=bf16) from mixed_precision, unless the
    script passes its own policy): the YAML is read, and nothing is claimed about it."""
    from precisionaudit.core.errors import UsageError

    good = config(tmp_path, "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
                            "fsdp_config:\n  fsdp_version: 2\nmixed_precision: bf16\n", "fsdp.yaml")
    bad = config(tmp_path, "distributed_type: FSDP\nmixed_precision: [bf16\n", "bad.yaml")
    assert dist_found(good) == []
    with pytest.raises(UsageError, match=r"bad\.yaml:3:1: invalid YAML"):
        audit_file(bad, DISTRIBUTED.rules)


def test_a_deepspeed_config_that_does_not_parse_is_one_line_naming_the_place(tmp_path):
    from precisionaudit.core.errors import UsageError

    path = config(tmp_path, '{\n  "zero_optimization": {"stage": 2},\n  "fp16": {"enabled": true\n}\n')
    with pytest.raises(UsageError, match=r"ds_config\.json:5:1: invalid JSON: Expecting ',' delimiter$"):
        audit_file(path, DISTRIBUTED.rules)


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA423", tmp_path)
