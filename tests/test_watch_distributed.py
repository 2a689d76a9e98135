"""precisionaudit.watch under torch.distributed: two ranks on CPU with gloo
(``torchrun --nproc_per_node 2``), DDP and FSDP2, and a DeepSpeed engine's shape.

Only rank 1's batches overflow (watch_distributed.py): the log must name rank 1, the step
its outliers start and the op, although every rank skips the step (DDP's all-reduce spreads
the inf/NaN) and the module names carry no wrapper prefix.
"""
import os
import socket
import subprocess
import sys

import pytest
import torch
from watch_distributed import STEPS
from watch_loops import OUTLIER_STEP, Gated, gated_batch

import precisionaudit
from precisionaudit.frontend import WATCH
from precisionaudit.watch.log import read_log, summarize

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(kind: str, log_dir) -> dict:
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(_free_port()), os.path.join(HERE, "watch_distributed.py"), kind, str(log_dir)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
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


class StandInEngine(torch.nn.Module):
    """A DeepSpeed engine's shape (DeepSpeed is not installed here): ``.module``,
    ``.optimizer`` holding the torch optimizer and the dynamic loss scale (``cur_scale``,
    ``overflow``), ``backward(loss)`` that scales, ``step()`` that skips on overflow."""

    class Optimizer:
        def __init__(self, params):
            self.optimizer = torch.optim.SGD(params, lr=1e-3)
            self.cur_scale, self.overflow = 2.0 ** 16, False

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.optimizer = self.Optimizer(module.parameters())

    def forward(self, *args):
        return self.module(*args)

    def backward(self, loss):
        (loss.float() * self.optimizer.cur_scale).backward()

    def step(self):
        params = [p for p in self.module.parameters() if p.grad is not None]
        self.optimizer.overflow = not all(torch.isfinite(p.grad).all() for p in params)
        if self.optimizer.overflow:
            self.optimizer.cur_scale /= 2
        else:
            for p in params:
                p.grad /= self.optimizer.cur_scale
            self.optimizer.optimizer.step()
        self.optimizer.optimizer.zero_grad()


def test_a_deepspeed_engine_is_watched_by_its_shape(tmp_path):
    torch.manual_seed(0)
    engine = StandInEngine(Gated())
    with precisionaudit.watch(engine, None, log_dir=str(tmp_path), every=5) as watch:
        for step in range(16):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = engine(gated_batch(step))
            engine.backward(loss)
            engine.step()
            watch.step(loss)
    report = summarize(read_log(str(tmp_path)))
    assert report["run"]["wrapper"] == "StandInEngine" and "gate.score" in report["modules"]
    assert report["scaler"]["kind"] == "DeepSpeedScale"
    assert OUTLIER_STEP in report["scaler"]["skipped"] and report["scaler"]["final_scale"] == engine.optimizer.cur_scale
    first = report["first_nonfinite"]
    assert (first["step"], first["module"], first["op"]) == (OUTLIER_STEP, "gate", "exp")
