"""PA421-PA423: distributed precision settings in training scripts (FSDP mixed-precision
policies, the loss scaler beside them) and DeepSpeed configs.

Each hazard sample marks the line a finding belongs on with ``# PA4nn`` (or, in JSON, the
key is looked up in the text); each clean twin gives no finding. The smaller cases pin the
facts the rules rest on, as torch 2.13 and DeepSpeed 0.19.8 implement them.
"""
import os
import re

import pytest

from precisionaudit.rules.engine import load_rules
from precisionaudit.frontend.training import audit as audit_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINING = os.path.join(ROOT, "samples", "training")
OURS = ("PA421", "PA422", "PA423")
PLACEHOLDER = re.compile(r"\{[a-z_]+(?::[^}]*)?\}")


@pytest.fixture(scope="module")
def rules():
    return [r for r in load_rules(checks=False) if r.id in OURS]


def findings(path, rules):
    return [(f.rule, f.line) for f in audit_file(path, rules)]


def marked(path):
    """(rule, line) of every ``# PA4nn`` marker of a sample script."""
    with open(path, encoding="utf-8") as fh:
        return [(m, n) for n, line in enumerate(fh, 1) for m in re.findall(r"# (PA42\d)\b", line)]


def key_line(path, key, nth=0):
    with open(path, encoding="utf-8") as fh:
        lines = [n for n, line in enumerate(fh, 1) if f'"{key}"' in line]
    return lines[nth]


def script(tmp_path, text, name="train.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def config(tmp_path, text, name="ds_config.json"):
    return script(tmp_path, text, name)


# --- the samples ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pa421_low_precision_gradient_reduce_hazard.py",
                                  "pa422_fp16_fsdp_without_sharded_scaler_hazard.py",
                                  "pa422_fsdp2_fp16_no_scaler_hazard.py",
                                  "pa423_deepspeed_dict_hazard.py"])
def test_a_hazard_script_gives_its_findings_on_the_marked_lines(rules, name):
    path = os.path.join(TRAINING, name)
    assert sorted(findings(path, rules)) == sorted(marked(path)) != []


@pytest.mark.parametrize("name,expected", [
    ("pa421_low_precision_gradient_reduce_hazard.json",
     [("PA421", "communication_data_type"), ("PA421", "grad_accum_dtype")]),
    ("pa423_deepspeed_static_loss_scale_hazard.json", [("PA423", "loss_scale")]),
    ("pa423_both_enabled_hazard.json", [("PA423", "bf16")]),
])
def test_a_hazard_config_gives_its_findings_on_the_keys_lines(rules, name, expected):
    path = os.path.join(TRAINING, name)
    assert sorted(findings(path, rules)) == sorted((rule, key_line(path, key)) for rule, key in expected)


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(TRAINING)
                                        if n.startswith(("pa421", "pa422", "pa423")) and "_clean." in n))
def test_a_clean_twin_gives_no_finding(rules, name):
    assert findings(os.path.join(TRAINING, name), rules) == []


def test_every_message_and_fix_is_filled_with_real_values(rules):
    """Strict templates: a placeholder no value fills would raise; none is left as text,
    and every case of every rule is rendered at least once."""
    seen = set()
    for name in os.listdir(TRAINING):
        if name.startswith(("pa421", "pa422", "pa423")) and "_hazard." in name:
            for f in audit_file(os.path.join(TRAINING, name), rules):
                assert not PLACEHOLDER.search(f.message + f.fix["to"]) and f.fix["action"] == "edit"
                seen.add((f.rule, f.evidence.get("what") or f.severity))
    assert {rule for rule, _ in seen} == set(OURS)
    assert len(seen) == 6  # PA421 reduce + accumulate, PA422 error + warning, PA423 warning + error


def test_severities_follow_the_cases(rules):
    found = {(f.rule, f.op): f.severity
             for name in ("pa422_fp16_fsdp_without_sharded_scaler_hazard.py", "pa423_both_enabled_hazard.json",
                          "pa423_deepspeed_static_loss_scale_hazard.json")
             for f in audit_file(os.path.join(TRAINING, name), rules)}
    assert found == {("PA422", "torch.amp.GradScaler"): "error", ("PA423", "bf16.enabled"): "error",
                     ("PA423", "fp16.loss_scale"): "warning"}


# --- PA421 in scripts: what FSDP really reduces in ------------------------------------------

HEAD = "import torch\n"
#: the flags the script declares (after the code under test: its lines keep their numbers); a
#: condition on ``args.bf16`` names ``--bf16`` as argparse spells it only where it is declared
FLAGS = ("import argparse\nparser = argparse.ArgumentParser()\n"
         + "".join(f"parser.add_argument('--{f}', action='store_true')\n" for f in ("bf16", "fp16", "fp32")))


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
    ("from torch.distributed.fsdp import MixedPrecision\nDTYPES = {'bf16': torch.bfloat16}\n"
     "p = MixedPrecision(param_dtype=DTYPES['bf16'])", False),
    # a module constant, read inside a function
    ("from torch.distributed.fsdp import MixedPrecision\nDT = torch.bfloat16\n"
     "def wrap():\n    return MixedPrecision(param_dtype=DT)", True),
    # a class of the same name that is not torch's
    ("class MixedPrecision:  # not torch.distributed.fsdp's\n    def __init__(self, **kw):\n        pass\n"
     "p = MixedPrecision(param_dtype=torch.bfloat16)", False),
])
def test_pa421_fires_exactly_when_fsdp_reduces_in_low_precision(rules, tmp_path, code, fires):
    found = [r for r, _ in findings(script(tmp_path, HEAD + code), rules) if r == "PA421"]
    assert found == (["PA421"] if fires else [])


def test_pa421_says_under_which_flag_it_holds(rules, tmp_path):
    path = script(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main(args, use_bf16):\n"
        "    a = MixedPrecision(param_dtype=torch.bfloat16 if args.bf16 else torch.float32)\n"
        "    dtype = torch.float32 if use_bf16 else torch.bfloat16\n"
        "    b = MixedPrecision(param_dtype=dtype)\n"
        "    low = torch.float16 if args.fp16 else torch.bfloat16\n"
        "    c = MixedPrecision(param_dtype=low)\n"
        "    d = MixedPrecision(param_dtype=low, reduce_dtype=torch.float32 if args.fp16 else None)\n") + FLAGS)
    found = {f.line: f for f in audit_file(path, rules) if f.rule == "PA421"}
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
def test_pa421_follows_a_dtype_through_if_branches(rules, tmp_path, body, condition):
    path = script(tmp_path, HEAD + "from torch.distributed.fsdp import MixedPrecision\n"
                  "def main(args, use_bf16):\n" + body + "    return MixedPrecision(param_dtype=dtype)\n" + FLAGS)
    found = [f for f in audit_file(path, rules) if f.rule == "PA421"]
    if condition == "silent":
        assert found == []
    else:
        (finding,) = found
        assert finding.evidence.get("condition") == condition


def test_pa421_reads_the_binding_before_the_use_not_one_after_it(rules, tmp_path):
    path = script(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main():\n"
        "    dtype = torch.float32\n"
        "    policy = MixedPrecision(param_dtype=dtype)\n"
        "    dtype = torch.bfloat16  # reused for something else\n"
        "    return policy, dtype\n"))
    assert findings(path, rules) == []


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
def test_pa421_reads_accelerates_fsdp_plugin(rules, tmp_path, policy, fires):
    path = script(tmp_path, ACCELERATE + f"plugin = FullyShardedDataParallelPlugin(mixed_precision_policy={policy})\n")
    found = [(f.rule, f.line) for f in audit_file(path, rules)]
    assert found == ([("PA421", 3)] if fires else [])


def test_an_accelerate_plugin_without_a_policy_is_left_to_the_accelerator(rules, tmp_path):
    path = script(tmp_path, ACCELERATE + "plugin = FullyShardedDataParallelPlugin(fsdp_version=2)\n")
    assert findings(path, rules) == []


# --- PA421 in DeepSpeed configs ---------------------------------------------------------------

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
def test_pa421_reads_deepspeeds_own_spellings(rules, tmp_path, body, fires):
    path = config(tmp_path, '{"train_micro_batch_size_per_gpu": 1, ' + body + "}")
    assert [r for r, _ in findings(path, rules)] == (["PA421"] if fires else [])


def test_configs_that_are_not_deepspeeds_are_skipped(rules, tmp_path):
    args = config(tmp_path, '{"fp16": true, "data_types": {"grad_accum_dtype": "bf16"}}', "training_args.json")
    other = config(tmp_path, '{"communication_data_type": "bf16"}', "notes.yaml")
    assert findings(args, rules) == []  # a TrainingArguments dump is no DeepSpeed config
    assert findings(other, rules) == []


# --- PA422: the scaler beside fp16 FSDP -----------------------------------------------------------

FSDP1 = HEAD + "from torch.distributed.fsdp import MixedPrecision\nP = MixedPrecision(param_dtype=torch.float16)\n"
FSDP2 = HEAD + ("from torch.distributed.fsdp import MixedPrecisionPolicy\n"
                "P = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)\n")


@pytest.mark.parametrize("code,expected", [
    (FSDP1 + "scaler = torch.amp.GradScaler('cuda')\n", [("PA422", 4, "error")]),
    (FSDP1 + "from torch.cuda.amp import GradScaler as GS\nscaler = GS()\n", [("PA422", 5, "error")]),
    (FSDP1 + "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n"
             "scaler = ShardedGradScaler()\n", []),
    (FSDP1 + "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n"
             "def make(sharded):\n"
             "    return ShardedGradScaler() if sharded else torch.amp.GradScaler('cuda')\n", []),
    (FSDP1, [("PA422", 3, "warning")]),  # no scaler at all: at the policy
    # a scaler passed in, or a library that makes its own: not this file's to say
    (FSDP1 + "def step(loss, scaler):\n    scaler.scale(loss).backward()\n", []),
    (FSDP1 + "from accelerate import Accelerator\n", []),
    # FSDP2 grads are DTensors: their found_inf is reduced across the mesh (found_inf_reduce_handler)
    (FSDP2 + "scaler = torch.amp.GradScaler('cuda')\n", []),
    (FSDP2, [("PA422", 3, "warning")]),
    # bf16 needs no scaler (a GradScaler under bf16 is PA404's)
    (HEAD + "from torch.distributed.fsdp import MixedPrecision\nP = MixedPrecision(param_dtype=torch.bfloat16,"
            " reduce_dtype=torch.float32)\nscaler = torch.amp.GradScaler('cuda')\n", []),
])
def test_pa422_fires_on_a_plain_scaler_with_fsdp1_fp16_or_on_no_scaler(rules, tmp_path, code, expected):
    found = [(f.rule, f.line, f.severity) for f in audit_file(script(tmp_path, code), rules) if f.rule == "PA422"]
    assert found == expected


def test_pa422_carries_the_flag_that_makes_fsdp_fp16(rules, tmp_path):
    path = script(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main(args):\n"
        "    dtype = torch.float16 if args.fp16 else torch.bfloat16\n"
        "    policy = MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32)\n"
        "    scaler = torch.amp.GradScaler('cuda', enabled=args.fp16)\n") + FLAGS)
    (finding,) = [f for f in audit_file(path, rules) if f.rule == "PA422"]
    assert (finding.line, finding.module) == (6, "main")
    assert finding.message.endswith("(when --fp16 is set)")


# --- PA423: DeepSpeed fp16 loss scaling ----------------------------------------------------------

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
def test_pa423_reads_fp16_as_deepspeed_does(rules, tmp_path, fp16, bf16, expected):
    text = '{"train_batch_size": 8, "fp16": ' + fp16 + (', "bf16": ' + bf16 if bf16 else "") + "}"
    found = [f.op for f in audit_file(config(tmp_path, text), rules) if f.rule == "PA423"]
    assert found == ([expected] if expected else [])


def test_pa423_knows_bf16s_old_name(rules, tmp_path):
    text = '{\n "train_batch_size": 8,\n "fp16": {"enabled": true},\n "bfloat16": {\n  "enabled": true}\n}'
    (finding,) = audit_file(config(tmp_path, text), rules)
    assert (finding.op, finding.line, finding.column) == ("bfloat16.enabled", 5, 3)


def test_an_accelerate_config_is_read_and_reported_on_only_when_it_parses(rules, tmp_path):
    """accelerate has no config key for FSDP's reduce dtype (its FSDP plugin makes
    MixedPrecision(param_dtype=bf16, reduce_dtype=bf16) from mixed_precision, unless the
    script passes its own policy): the YAML is read, and nothing is claimed about it."""
    from precisionaudit.core.errors import UsageError

    good = config(tmp_path, "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
                            "fsdp_config:\n  fsdp_version: 2\nmixed_precision: bf16\n", "fsdp.yaml")
    bad = config(tmp_path, "distributed_type: FSDP\nmixed_precision: [bf16\n", "bad.yaml")
    assert findings(good, rules) == []
    with pytest.raises(UsageError, match=r"bad\.yaml:3:1: invalid YAML"):
        audit_file(bad, rules)


def test_a_deepspeed_config_that_does_not_parse_is_one_line_naming_the_place(rules, tmp_path):
    from precisionaudit.core.errors import UsageError

    path = config(tmp_path, '{\n  "zero_optimization": {"stage": 2},\n  "fp16": {"enabled": true\n}\n')
    with pytest.raises(UsageError, match=r"ds_config\.json:5:1: invalid JSON: Expecting ',' delimiter$"):
        audit_file(path, rules)


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
def test_deepspeed_configs_written_in_a_script_are_read_like_json(rules, tmp_path, code, expected):
    assert findings(script(tmp_path, "import deepspeed\n" + code + "\n"), rules) == expected


def test_a_key_of_a_script_config_is_found_at_its_column(rules, tmp_path):
    path = script(tmp_path, 'import deepspeed\nc = {\n    "fp16": {\n        "enabled": True, "loss_scale": 1}}\n')
    (finding,) = audit_file(path, rules)
    assert (finding.line, finding.column, finding.op) == (4, 26, "fp16.loss_scale")

