"""DeepSpeed JSON and accelerate YAML configs: which files are configs (the suffix says which
kind a file may be, ``read_config`` whether it is one, parsing it once), their values and the
line and column of each key, and bad input as one line naming the file and the place."""
import json
import os
import subprocess
import sys

import pytest

from precisionaudit.core.errors import UsageError
from precisionaudit.frontend.training import config_kind as suffix_kind
from precisionaudit.training.configs import read_config
from precisionaudit.training.json_keys import first_repeated_key, key_offset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINING = os.path.join(ROOT, "samples", "training")


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def where(text, needle, nth=0):
    """(line, column) of the ``nth`` occurrence of ``needle`` in ``text``: the oracle the
    scanner is checked against, found by plain text search."""
    offset = -1
    for _ in range(nth + 1):
        offset = text.index(needle, offset + 1)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def config_kind(path):
    """The kind of config ``path`` is, as a scan decides it (the suffix, then the contents);
    a broken file is still a config when ``read_config`` claims it (and reports it)."""
    kind = suffix_kind(path)
    if kind is None:
        return None
    try:
        return kind if read_config(path, kind) is not None else None
    except UsageError:
        return kind


# --- which files are configs --------------------------------------------------------------

@pytest.mark.parametrize("name,text,kind", [
    ("ds.json", '{"train_micro_batch_size_per_gpu": 4, "fp16": {"enabled": true}}', "deepspeed"),
    ("ds_zero.json", '{"zero_optimization": {"stage": 3}}', "deepspeed"),
    ("ds_bf16.json", '{"bf16": {"enabled": "auto"}}', "deepspeed"),
    # an HF TrainingArguments dump: fp16 is a flag there, not DeepSpeed's section
    ("training_args.json", '{"output_dir": "out", "fp16": true, "gradient_accumulation_steps": 8}', None),
    ("config.json", '{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}', None),
    ("package.json", '{"name": "x", "version": "1.0.0"}', None),
    ("list.json", '[{"zero_optimization": {}}]', None),
    ("accelerate.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: bf16\n",
     "accelerate"),
    ("default_config.yml", "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n", "accelerate"),
    ("hydra.yaml", "trainer:\n  mixed_precision: bf16\n  distributed_type: ddp\n", None),
    ("ci.yml", "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n", None),
    ("notes.txt", '{"zero_optimization": {}}', None),
])
def test_config_kind_claims_deepspeed_and_accelerate_configs_only(tmp_path, name, text, kind):
    assert config_kind(write(tmp_path, name, text)) == kind


def test_a_broken_file_naming_a_deepspeed_key_is_claimed_and_reported_at_its_line(tmp_path):
    text = '{\n  "train_micro_batch_size_per_gpu": 8,\n  "fp16": {"enabled" true}\n}\n'
    path = write(tmp_path, "ds.json", text)
    assert config_kind(path) == "deepspeed"
    with pytest.raises(UsageError) as error:
        read_config(path, "deepspeed")
    assert str(error.value) == f"{path}:3:22: invalid JSON: Expecting ':' delimiter"


HJSON = """{
  // ZeRO 2, as DeepSpeed's hjson reader allows
  "zero_optimization": {"stage": 2,},  # a trailing comma and a hash comment
  /* a block
     comment */
  "fp16": {"enabled": true, "loss_scale": 1, "note": "// and # in a string stay",},
}
"""


def test_comments_and_trailing_commas_are_read_as_deepspeed_reads_them(tmp_path):
    path = write(tmp_path, "ds.json", HJSON)
    assert config_kind(path) == "deepspeed"
    config = read_config(path, "deepspeed")
    assert config.get("fp16", "note") == "// and # in a string stay"
    assert config.position("fp16", "loss_scale") == where(HJSON, '"loss_scale"')


def test_hjson_beyond_comments_is_reported_where_strict_json_stopped(tmp_path):
    path = write(tmp_path, "ds.json", '{\n  // an unquoted key\n  "zero_optimization": {stage: 2}\n}')
    with pytest.raises(UsageError, match=r"ds\.json:2:3: invalid JSON: Expecting property name"):
        read_config(path, "deepspeed")


def test_a_broken_json_naming_no_deepspeed_only_key_is_not_ours(tmp_path):
    assert config_kind(write(tmp_path, "x.json", '{"name": ')) is None
    assert config_kind(write(tmp_path, "args.json", '{"fp16": {"enabled": true}, ')) is None


def test_binary_and_non_utf8_files_are_no_config_of_ours(tmp_path):
    binary = write(tmp_path, "b.json", b'{"zero_optimization": {}}\0\0', mode="wb")
    latin = write(tmp_path, "l.json", b'{"zero_optimization": {},\n "x": "\xe9"}', mode="wb")
    assert config_kind(binary) is None and config_kind(latin) is None
    assert read_config(binary, "deepspeed") is None and read_config(latin, "deepspeed") is None


# --- values and key positions -------------------------------------------------------------

NESTED = """{
  "note": "a string with {braces}, [brackets], \\"quotes\\": and commas,",
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "cpu"},
    "buckets": [1, 2, {"inner": {"deep": 5}}, [ {"x": 1} ]]
  },
  "fp16": {"enabled": true, "loss_scale": 1},
  "stage": "top-level key of the same name as a nested one",
  "\\u0062f16": {"enabled": false}
}
"""


@pytest.mark.parametrize("path,needle,nth", [
    (("zero_optimization",), '"zero_optimization"', 0),
    (("zero_optimization", "stage"), '"stage"', 0),
    (("stage",), '"stage"', 1),
    (("zero_optimization", "offload_param", "device"), '"device"', 0),
    (("zero_optimization", "buckets", 2, "inner", "deep"), '"deep"', 0),
    (("zero_optimization", "buckets", 3, 0, "x"), '"x"', 0),
    (("fp16", "loss_scale"), '"loss_scale"', 0),
    (("bf16",), '"\\u0062f16"', 0),  # an escaped key is found by its decoded name
])
def test_each_key_is_found_at_its_line_and_column(tmp_path, path, needle, nth):
    config = read_config(write(tmp_path, "ds.json", NESTED), "deepspeed")
    assert config.position(*path) == where(NESTED, needle, nth)


def test_values_are_json_values_and_absent_keys_give_the_default(tmp_path):
    config = read_config(write(tmp_path, "ds.json", NESTED), "deepspeed")
    assert config.get("fp16", "loss_scale") == 1 and config.get("bf16", "enabled") is False
    assert config.get("zero_optimization", "buckets", 2, "inner", "deep") == 5
    assert config.get("fp16", "nope", default="d") == "d" and config.get("note", "x") is None
    assert config.position("nope") == (1, 1)


def test_a_duplicate_key_is_reported_where_it_repeats(tmp_path):
    """DeepSpeed refuses duplicate keys (dict_raise_error_on_duplicate_keys)."""
    text = '{\n  "fp16": {"enabled": true},\n  "zero_optimization": {"stage": 1},\n  "fp16": {"enabled": false}\n}'
    path = write(tmp_path, "ds.json", text)
    with pytest.raises(UsageError) as error:
        read_config(path, "deepspeed")
    line, column = where(text, '"fp16"', 1)
    assert str(error.value) == (f"{path}:{line}:{column}: duplicate key 'fp16' "
                                "(DeepSpeed refuses a config with duplicate keys)")


def test_the_same_key_in_different_objects_is_no_duplicate(tmp_path):
    text = '{"fp16": {"enabled": true}, "bf16": {"enabled": false}, "zero_optimization": {"stage": 2}}'
    config = read_config(write(tmp_path, "ds.json", text), "deepspeed")
    assert config.position("bf16", "enabled") == where(text, '"enabled"', 1)


def test_a_10_mb_config_is_read_and_its_last_key_found(tmp_path):
    rows = [{"id": i, "name": f"n{i}", "vals": [i, i + 1, {"k": "v"}]} for i in range(150_000)]
    text = json.dumps({"train_batch_size": 8, "rows": rows, "fp16": {"enabled": True, "loss_scale": 1}}, indent=1)
    assert len(text) > 10_000_000
    path = write(tmp_path, "big.json", text)
    assert config_kind(path) == "deepspeed"
    config = read_config(path, "deepspeed")
    assert config.position("fp16", "loss_scale") == where(text, '"loss_scale"')
    assert config.position("rows", 149_999, "vals", 2, "k") == where(text, '"k"', 149_999)


def test_deeply_nested_arrays_parse_and_keys_inside_them_are_found(tmp_path):
    depth = 500
    text = '{"train_batch_size": 1, "a": ' + "[" * depth + '{"deep": 1}' + "]" * depth + "}"
    config = read_config(write(tmp_path, "ds.json", text), "deepspeed")
    assert config.position("a", *[0] * depth, "deep") == where(text, '"deep"')


def test_nesting_past_the_parsers_reach_is_one_line_not_a_traceback(tmp_path):
    text = '{"zero_optimization": {}, "a": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path = write(tmp_path, "ds.json", text)
    assert config_kind(path) == "deepspeed"
    with pytest.raises(UsageError, match=r"ds\.json: invalid JSON: nested too deeply$"):
        read_config(path, "deepspeed")


def test_the_key_scanners_themselves_have_no_depth_limit():
    """json.loads stops near Python's recursion limit; the scanners do not recurse."""
    depth = 200_000
    text = '{"a": ' + '{"a": ' * depth + '{"b": 1, "b": 2}' + "}" * depth + "}"
    assert key_offset(text, ("a",) * (depth + 1) + ("b",)) == text.index('"b"')
    assert first_repeated_key(text) == ("b", text.rindex('"b"'))


@pytest.mark.parametrize("text,repeated", [
    ('{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}', None),
    ('{"a": "a", "b": ["a", "a"], "c": {"x": "c"}}', None),
    ('{"a": {"x": 1, "y": {}, "x": 2}}', ("x", 24)),
    ('["a", "a"]', None),
    ('"a"', None),
])
def test_a_repeated_key_is_one_in_the_same_object(text, repeated):
    assert first_repeated_key(text) == repeated


# --- accelerate YAML ------------------------------------------------------------------------

ACCELERATE = """compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_offload_params: false
  fsdp_transformer_layer_cls_to_wrap: [LlamaDecoderLayer, LlamaMLP]
mixed_precision: bf16
num_processes: 8
"""


def test_accelerate_keys_are_found_at_their_line_and_column(tmp_path):
    config = read_config(write(tmp_path, "acc.yaml", ACCELERATE), "accelerate")
    assert config.get("fsdp_config", "fsdp_version") == 2 and config.get("mixed_precision") == "bf16"
    assert config.position("mixed_precision") == where(ACCELERATE, "mixed_precision")
    assert config.position("fsdp_config", "fsdp_offload_params") == where(ACCELERATE, "fsdp_offload_params")
    assert config.position("fsdp_config", "fsdp_transformer_layer_cls_to_wrap", 1) == where(ACCELERATE, "LlamaMLP")


@pytest.mark.parametrize("text,message", [
    ("distributed_type: FSDP\nmixed_precision: [bf16\n", r"acc\.yaml:3:1: invalid YAML: "),
    ("distributed_type: FSDP\n  bad: indent\n", r"acc\.yaml:2:6: invalid YAML: "),
    ("distributed_type: FSDP\n---\ndistributed_type: NO\n", r"acc\.yaml:2:1: invalid YAML: "),
    ("distributed_type: FSDP\nx: " + "[" * 5000 + "]" * 5000 + "\n", r"acc\.yaml: invalid YAML: nested too deeply$"),
])
def test_bad_yaml_is_one_line_naming_the_place(tmp_path, text, message):
    path = write(tmp_path, "acc.yaml", text)
    assert config_kind(path) == "accelerate"
    with pytest.raises(UsageError, match=message) as error:
        read_config(path, "accelerate")
    assert "\n" not in str(error.value)


def test_configs_are_read_and_checked_without_torch():
    """The pre-commit hook runs on DeepSpeed .json files: reading them imports no torch."""
    code = (
        "import sys\n"
        "from precisionaudit.rules.engine import load_rules\n"
        "from precisionaudit.frontend.training import audit as audit_file\n"
        "rules = [r for r in load_rules(checks=False) if r.scope == 'training']\n"
        f"found = audit_file({os.path.join(TRAINING, 'pa423_deepspeed_static_loss_scale_hazard.json')!r}, rules)\n"
        f"found += audit_file({os.path.join(TRAINING, 'pa421_low_precision_gradient_reduce_hazard.py')!r}, rules)\n"
        "assert found, 'the hazard samples give findings'\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
