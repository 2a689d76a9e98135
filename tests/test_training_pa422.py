"""PA422 fp16-fsdp-without-sharded-scaler: distributed precision settings (FSDP policies, DeepSpeed
configs). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""

import pytest
from precisionaudit.frontend.training import audit as audit_file
from training_rules import DISTRIBUTED, FLAGS, HEAD, assert_page_examples, marked, sample, twins, write

dist_found = DISTRIBUTED.findings


@pytest.mark.parametrize("name", ["pa422_fp16_fsdp_without_sharded_scaler_hazard.py",
                                  "pa422_fsdp2_fp16_no_scaler_hazard.py"])
def test_a_hazard_script_gives_its_findings_on_the_marked_lines(name):
    path = sample(name)
    assert sorted(dist_found(path)) == sorted(marked(path)) != []


def test_the_clean_twins_give_no_finding_and_every_case_is_rendered():
    assert [dist_found(sample(n)) for n in twins("pa422")] == [[] for _ in twins("pa422")]
    assert DISTRIBUTED.cases("pa422") == {("PA422", "error"), ("PA422", "warning")}


def test_the_severity_follows_the_case():
    hazard = sample("pa422_fp16_fsdp_without_sharded_scaler_hazard.py")
    found = {f.op: f.severity for f in audit_file(hazard, DISTRIBUTED.rules)}
    assert found == {"torch.amp.GradScaler": "error"}


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
def test_pa422_fires_on_a_plain_scaler_with_fsdp1_fp16_or_on_no_scaler(tmp_path, code, expected):
    found = [(f.rule, f.line, f.severity) for f in audit_file(write(tmp_path, code), DISTRIBUTED.rules) if f.rule == "PA422"]
    assert found == expected


def test_pa422_carries_the_flag_that_makes_fsdp_fp16(tmp_path):
    path = write(tmp_path, HEAD + (
        "from torch.distributed.fsdp import MixedPrecision\n"
        "def main(args):\n"
        "    dtype = torch.float16 if args.fp16 else torch.bfloat16\n"
        "    policy = MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32)\n"
        "    scaler = torch.amp.GradScaler('cuda', enabled=args.fp16)\n") + FLAGS)
    (finding,) = [f for f in audit_file(path, DISTRIBUTED.rules) if f.rule == "PA422"]
    assert (finding.line, finding.module) == (6, "main")
    assert finding.message.endswith("(when --fp16 is set)")


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA422", tmp_path)
