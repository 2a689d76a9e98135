"""precisionaudit.watch under torch.distributed: two ranks on CPU with gloo
(``torchrun --nproc_per_node 2``), DDP, FSDP2 and real DeepSpeed (ZeRO stages 1-3, bf16).

Only rank 1's batches overflow (watch_distributed.py): the log must name rank 1, the step
its outliers start and the op, although every rank skips the step (DDP's all-reduce spreads
the inf/NaN) and the module names carry no wrapper prefix.
"""
import json
import os
import socket
import subprocess
import sys

import pytest
from watch_distributed import STEPS
from watch_loops import OUTLIER_STEP

from precisionaudit.frontend import WATCH
from precisionaudit.plan.watch import watch_plan
from precisionaudit.watch.log import read_log, summarize

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ENGINES = ["ddp", "fsdp", "deepspeed1", "deepspeed2", "deepspeed3"]


def torchrun(kind: str, log_dir, *flags) -> dict:
    if kind.startswith("deepspeed"):
        pytest.importorskip("deepspeed", reason="DeepSpeed is a test extra (deepspeed==0.19.8)")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(_free_port()), os.path.join(HERE, "watch_distributed.py"), kind, str(log_dir), *flags]
    # DeepSpeed's CPU accelerator (it refuses fp16: its runs are bf16)
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return summarize(read_log(str(log_dir)))


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_the_log_names_the_rank_whose_batch_overflowed(kind, tmp_path):
    report = torchrun(kind, tmp_path / "log")
    assert report["world_size"] == 2 and report["ranks_logged"] == [0, 1] and report["complete"]
    assert report["steps"] == STEPS
    first = report["first_nonfinite"]
    assert (first["rank"], first["step"], first["phase"]) == (1, OUTLIER_STEP, "forward")
    assert (first["module"], first["op"]) == ("gate", "exp")  # no "module." / FSDP prefix
    triggers = report["triggers"]
    assert triggers[0]["step"] == OUTLIER_STEP and triggers[0]["ranks"] == [1]  # rank 0's replay is finite
    findings = {f.rule: f for f in WATCH.findings(report, str(tmp_path / "log"))}
    assert findings["PA708"].evidence["rank"] == 1 and "rank 0 stayed finite" in findings["PA708"].message
    assert findings["PA701"].module == "gate"
    # both ranks exchanged their views at every sample
    assert all(len(e["ranks"]) == 2 for e in report["exchanges"])
    if kind == "ddp":
        assert report["run"]["wrapper"] == "DistributedDataParallel" and OUTLIER_STEP in report["scaler"]["skipped"]




@pytest.mark.parametrize("stage", [1, 2, 3])
def test_real_deepspeed_replays_without_breaking_the_ranks_collectives(stage, tmp_path):
    """Issue 43: under ZeRO-3 the float32 recheck of the replay reran collectives (a sharded
    parameter's all-gather) on one rank and the region's origin blamed ``empty``. The replay
    now runs the ranks together and reruns no collective or allocation: the job finishes,
    rank 1's exp is named, and since exp(x > 88.7) is inf in float32 too, the finding says it
    is not a precision failure and the plan writes no override for it."""
    log = tmp_path / "log"
    report = torchrun(f"deepspeed{stage}", log)
    assert report["complete"] and report["run"]["wrapper"] == "DeepSpeedEngine" and report["steps"] == STEPS
    first = report["first_nonfinite"]
    assert (first["rank"], first["step"], first["module"], first["op"]) == (1, OUTLIER_STEP, "gate", "exp")
    assert first["fp32_finite"] is False and first["region"] is None  # no origin, no `empty`
    findings = {f.rule: f for f in WATCH.findings(report, str(log))}
    assert "not a precision failure" in findings["PA701"].message and "plan" not in findings["PA701"].fix
    assert findings["PA701"].evidence["operands"][0] > 88.7
    plan, header = watch_plan(report, list(findings.values()), str(log))
    assert plan.overrides == [] and any(line.startswith("not planned: PA701") for line in header)


@pytest.mark.parametrize("kind", ENGINES)
def test_the_losses_are_bit_identical_with_and_without_the_watch(kind, tmp_path):
    """Every engine: the same clean loop without the watch and with it, in one process; each
    rank's losses are the same bits (float equality of every step's loss)."""
    log = tmp_path / "log"
    log.mkdir()
    torchrun(kind, log, "--identity")
    for rank in (0, 1):
        with open(log / f"losses_{rank}.json") as f:
            losses = json.load(f)
        assert len(losses["watched"]) == STEPS and losses["watched"] == losses["unwatched"]


def test_fsdp2_shares_count_every_ranks_shard(tmp_path):
    """Issue 43: the embedding's trained rows live in rank 0's shard; the lost-update share was
    the last rank's shard's (0.00, nothing moved there) where the whole parameter's is 0.92.
    The ranks' counts now add up at the sample: the share equals one process's over the
    whole parameter, on the same batches."""
    from watch_distributed import train_lookup

    sharded = torchrun("fsdp_shards", tmp_path / "sharded")
    train_lookup(str(tmp_path / "single"), None)
    single = summarize(read_log(str(tmp_path / "single")))
    share = sharded["parameters"]["embed.weight"]["update_lost_share"]
    assert share == single["parameters"]["embed.weight"]["update_lost_share"] and 0.5 < share < 1.0
    assert sharded["parameters"]["embed.weight"]["moving_elements"] == \
        single["parameters"]["embed.weight"]["moving_elements"]
    lost = [f for f in WATCH.findings(sharded, str(tmp_path / "sharded")) if f.rule == "PA706"]
    assert len(lost) == 1 and lost[0].evidence["parameters"][0] == {"name": "embed.weight", "share": share}


def test_fsdp2_mixed_precision_is_reported_in_the_dtype_it_computes_in(tmp_path):
    """MixedPrecisionPolicy(param_dtype=bfloat16) over float32 parameters: the run computes in
    bfloat16 (it was reported as float32, the storage dtype), the storage dtype beside it."""
    report = torchrun("fsdp_mp", tmp_path / "log")
    assert report["run"]["dtype"] == "bfloat16" and report["run"]["storage_dtype"] == "float32"
    from precisionaudit.report.watch_report import render_text, watch_document

    text = render_text(watch_document(report, [], str(tmp_path / "log")))
    assert "run: bfloat16 pure (parameters stored in float32)" in text


def test_under_ddp_the_failing_micro_batch_is_named(tmp_path):
    """Two micro-batches a step; rank 1's first is the outlier, its last is not (the replay of
    the last micro-batch found nothing): every rank replays both, and rank 1's first is named."""
    report = torchrun("ddp_accumulate", tmp_path / "log")
    first = report["first_nonfinite"]
    assert (first["rank"], first["step"], first["micro_batch"], first["micro_batches"], first["op"]) == \
        (1, OUTLIER_STEP, 0, 2, "exp")
    findings = {f.rule: f for f in WATCH.findings(report, str(tmp_path / "log"))}
    assert "(rank 1, micro-batch 1 of 2)" in findings["PA701"].message


def test_under_ddp_one_overflowing_linear_is_planned_alone(tmp_path):
    """Without a float32 rerun of the modules (the ranks replay together), the GEMM's region is
    still narrowed to where its float32 result lands: block 3's second linear, 1 of 14."""
    report = torchrun("ddp_residual", tmp_path / "log")
    assert report["first_nonfinite"]["module"] == "blocks.3.fc2"
    findings = WATCH.findings(report, str(tmp_path / "log"))
    plan, header = watch_plan(report, findings, str(tmp_path / "log"))
    assert [(o.module, o.ops) for o in plan.overrides] == [("blocks.3", ["linear#2"])]
    assert any("keeps 1 of 14 Linear modules in float32" in line for line in header)
