"""PA421 low-precision-gradient-reduce: distributed precision settings (FSDP policies, DeepSpeed
configs). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""

import pytest
from precisionaudit.frontend.training import audit as audit_file
from training_rules import (DISTRIBUTED, FLAGS, HEAD, assert_page_examples, config, key_line, marked, sample,
                            twins, write)

dist_found = DISTRIBUTED.findings


@pytest.mark.parametrize("name", ['pa421_low_precision_gradient_reduce_hazard.py'])
def test_a_hazard_script_gives_its_findings_on_the_marked_lines(name):
    path = sample(name)
    assert sorted(dist_found(path)) == sorted(marked(path)) != []


@pytest.mark.parametrize("name,expected", [
    ("pa421_low_precision_gradient_reduce_hazard.json",
     [("PA421", "communication_data_type"), ("PA421", "grad_accum_dtype")])])
def test_a_hazard_config_gives_its_findings_on_the_keys_lines(name, expected):
    path = sample(name)
    assert sorted(dist_found(path)) == sorted((rule, key_line(path, key)) for rule, key in expected)


def test_the_clean_twins_give_no_finding_and_every_case_is_rendered():
    assert [dist_found(sample(n)) for n in twins("pa421")] == [[] for _ in twins("pa421")]
    assert DISTRIBUTED.cases("pa421") == {("PA421", "reduced across data-parallel ranks"), ("PA421", "accumulated across micro-steps")}


@pytest.mark.parametrize("code,fires", [
    # FSDP1: an unset (or None) reduce_dtype follows param_dtype (_init_param_reduce_dtypes)
    ("from torch.distributed.fsdp import MixedPrecision\np = MixedPrecision(param_dtype=torch.bfloat16)", True),
    ("from torch.distributed.fsdp import MixedPrecision\n"
     "p = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=None)", True),
    ("from torch.distributed.fsdp import MixedPrecision\np = MixedPrecision(torch.bfloat16)", True),
    ("from torch.distributed.fsdp import MixedPrecision\np = MixedPrecision(torch.bfloat16, torch.float32)", False),
    ("from torch.distributed.fsdp.api import MixedPrecision as MP\np = MP(reduce_dtype=torch.half)", True),
    ("import torch.distributed.fsdp as fsdp\np = fsdp.MixedPrecision(param_dtype=torch.float16)", True),
    ("p = torch.distributed.fsdp.MixedPrecision(param_dtype=torch.float32)", False),
    ("from torch.distributed.fsdp import MixedPrecision\np = MixedPrecision(buffer_dtype=torch.bfloat16)", False),
    # FSDP2: foreach_reduce reduces in the gradients' dtype when reduce_dtype is None
    ("from torch.distributed.fsdp import MixedPrecisionPolicy\np = MixedPrecisionPolicy(param_dtype=torch.bfloat16)",
     True),
    ("from torch.distributed.fsdp import MixedPrecisionPolicy\n"
     "p = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)", True),
    ("from torch.distributed.fsdp import MixedPrecisionPolicy\np = MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)",
     True),
    ("from torch.distributed._composable.fsdp import MixedPrecisionPolicy\n"
     "p = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)", False),
    # dtypes the file cannot know: silent
    ("from torch.distributed.fsdp import MixedPrecision\ndef f(dt):\n    return MixedPrecision(param_dtype=dt)", False),
    ("from torch.distributed.fsdp import MixedPrecision\ndef f(**kw):\n    return MixedPrecision(**kw)", False),
    ("from torch.distributed.fsdp import MixedPrecision\nDT = torch.bfloat16\nDT = torch.float32\n"
     "p = MixedPrecision(param_dtype=DT)", False),
    # a dict literal looked up with a literal key is that entry
    ("from torch.distributed.fsdp import MixedPrecision\nDTYPES = {'bf16': torch.bfloat16}\n"
     "p = MixedPrecision(param_dtype=DTYPES['bf16'])", True),
    ("from torch.distributed.fsdp import MixedPrecision\nDTYPES = {'bf16': torch.bfloat16}\n"
     "p = MixedPrecision(param_dtype=DTYPES['bf16'], reduce_dtype=torch.float32)", False),
    # a module constant, read inside a function
    ("from torch.distributed.fsdp import MixedPrecision\nDT = torch.bfloat16\n"
     "def wrap():\n    return MixedPrecision(param_dtype=DT)", True),
    # a class of the same name that is not torch's
    ("class MixedPrecision:  # not torch.distributed.fsdp's\n    def __init__(self, **kw):\n        pass\n"
     "p = MixedPrecision(param_dtype=torch.bfloat16)", False),
])
def test_pa421_fires_exactly_when_fsdp_reduces_in_low_precision(tmp_path, code, fires):
    found = [r for r, _ in dist_found(write(tmp_path, HEAD + code)) if r == "PA421"]
    assert found == (["PA421"] if fires else [])


def test_pa421_says_under_which_flag_it_holds(tmp_path):
    path = write(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main(args, use_bf16):\n"
        "    a = MixedPrecision(param_dtype=torch.bfloat16 if args.bf16 else torch.float32)\n"
        "    dtype = torch.float32 if use_bf16 else torch.bfloat16\n"
        "    b = MixedPrecision(param_dtype=dtype)\n"
        "    low = torch.float16 if args.fp16 else torch.bfloat16\n"
        "    c = MixedPrecision(param_dtype=low)\n"
        "    d = MixedPrecision(param_dtype=low, reduce_dtype=torch.float32 if args.fp16 else None)\n") + FLAGS)
    found = {f.line: f for f in audit_file(path, DISTRIBUTED.rules) if f.rule == "PA421"}
    assert sorted(found) == [4, 6, 8, 9]
    assert found[4].message.endswith("(when --bf16 is set)") and found[4].module == "main"
    assert found[6].message.endswith("(when use_bf16 is false)")
    assert found[8].evidence.get("condition") is None  # low on every path: no condition
    assert found[8].evidence["dtype"] == "float16"
    # the fp16 branch reduces in fp32; the other reduces in bf16 (param_dtype, reduce None)
    assert found[9].message.endswith("(when --fp16 is not set)") and found[9].evidence["dtype"] == "bfloat16"


@pytest.mark.parametrize("body,condition", [
    ("    dtype = torch.float32\n    if args.bf16:\n        dtype = torch.bfloat16\n", "when --bf16 is set"),
    ("    if args.fp16:\n        dtype = torch.float32\n    else:\n        dtype = torch.bfloat16\n",
     "when --fp16 is not set"),
    ("    if args.fp32:\n        dtype = torch.float32\n    elif use_bf16:\n        dtype = torch.bfloat16\n"
     "    else:\n        dtype = torch.float32\n", "when --fp32 is not set and use_bf16 is true"),
    ("    dtype = torch.float32\n    dtype = torch.bfloat16\n", None),  # the last binding holds
    ("    dtype = torch.bfloat16\n    dtype = torch.float32\n", "silent"),
    ("    dtype = torch.float32\n    for _ in range(2):\n        dtype = torch.bfloat16\n", "silent"),  # a loop
    ("    dtype = torch.float32\n    if args.a:\n        if args.b:\n            dtype = torch.bfloat16\n",
     "silent"),  # overridden only when two conditions hold: not said simply, so not said
])
def test_pa421_follows_a_dtype_through_if_branches(tmp_path, body, condition):
    path = write(tmp_path, HEAD + "from torch.distributed.fsdp import MixedPrecision\n"
                  "def main(args, use_bf16):\n" + body + "    return MixedPrecision(param_dtype=dtype)\n" + FLAGS)
    found = [f for f in audit_file(path, DISTRIBUTED.rules) if f.rule == "PA421"]
    if condition == "silent":
        assert found == []
    else:
        (finding,) = found
        assert finding.evidence.get("condition") == condition


def test_pa421_reads_the_binding_before_the_use_not_one_after_it(tmp_path):
    path = write(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main():\n"
        "    dtype = torch.float32\n"
        "    policy = MixedPrecision(param_dtype=dtype)\n"
        "    dtype = torch.bfloat16  # reused for something else\n"
        "    return policy, dtype\n"))
    assert dist_found(path) == []


ACCELERATE = HEAD + "from accelerate import FullyShardedDataParallelPlugin\n"


@pytest.mark.parametrize("policy,fires", [
    ('"bf16"', True),  # set_mixed_precision: param_dtype = reduce_dtype = bf16
    ('"fp8"', True),  # fp8 maps to bf16 there
    ('"fp32"', False),
    ('{"param_dtype": torch.bfloat16, "reduce_dtype": torch.bfloat16, "buffer_dtype": torch.bfloat16}', True),
    ('{"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32, "buffer_dtype": torch.bfloat16}', False),
    ('{"param_dtype": torch.bfloat16}', False),  # accelerate refuses a dict without every key
    ("policy_from_config", False),
])
def test_pa421_reads_accelerates_fsdp_plugin(tmp_path, policy, fires):
    path = write(tmp_path, ACCELERATE + f"plugin = FullyShardedDataParallelPlugin(mixed_precision_policy={policy})\n")
    found = [(f.rule, f.line) for f in audit_file(path, DISTRIBUTED.rules)]
    assert found == ([("PA421", 3)] if fires else [])


def test_an_accelerate_plugin_without_a_policy_is_left_to_the_accelerator(tmp_path):
    path = write(tmp_path, ACCELERATE + "plugin = FullyShardedDataParallelPlugin(fsdp_version=2)\n")
    assert dist_found(path) == []


@pytest.mark.parametrize("body,fires", [
    ('"communication_data_type": "bf16"', True),
    ('"communication_data_type": "FP16"', True),  # DeepSpeed lower-cases it
    ('"communication_data_type": "fp32"', False),
    ('"communication_data_type": "auto"', False),
    ('"communication_data_type": "bfloat16"', False),  # DeepSpeed rejects it: not this rule's
    ('"data_types": {"grad_accum_dtype": "bfloat16"}', True),  # DtypeEnum takes this spelling
    ('"data_types": {"grad_accum_dtype": "fp32"}', False),
    ('"data_types": {"grad_accum_dtype": "auto"}', False),
    ('"bf16": {"enabled": true}', False),  # DeepSpeed's default reduce dtype: not a key to point at
])
def test_pa421_reads_deepspeeds_own_spellings(tmp_path, body, fires):
    path = config(tmp_path, '{"train_micro_batch_size_per_gpu": 1, ' + body + "}")
    assert [r for r, _ in dist_found(path)] == (["PA421"] if fires else [])


def test_configs_that_are_not_deepspeeds_are_skipped(tmp_path):
    args = config(tmp_path, '{"fp16": true, "data_types": {"grad_accum_dtype": "bf16"}}', "training_args.json")
    other = config(tmp_path, '{"communication_data_type": "bf16"}', "notes.yaml")
    assert dist_found(args) == []  # a TrainingArguments dump is no DeepSpeed config
    assert dist_found(other) == []


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA421", tmp_path)
