"""A two-rank training job for precisionaudit.watch's tests, run with
``torchrun --nproc_per_node 2 watch_distributed.py KIND LOG_DIR`` (gloo, CPU).

- ``ddp``: DDP around the gated model of watch_loops, float16 CPU autocast and GradScaler;
  only rank 1's batches from OUTLIER_STEP on are outliers: its exp overflows, DDP's
  all-reduce spreads the inf/NaN to rank 0's gradients, and both ranks skip the step;
- ``fsdp``: the same model under FSDP2 (``fully_shard``), float16 autocast and no scaler:
  the fused gradient check finds rank 1's inf/NaN (agreed across the ranks) and both ranks
  replay the step through FSDP's all-gathers and reduce-scatters.
"""
import gc
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from watch_loops import OUTLIER_SCALE, OUTLIER_STEP, Gated  # noqa: E402

import precisionaudit  # noqa: E402

STEPS = 16


def batch(step: int, rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * rank + step)
    scale = OUTLIER_SCALE if rank == 1 and step >= OUTLIER_STEP else 1.0
    return torch.randn(8, 16, generator=g) * scale


def main(kind: str, log_dir: str) -> None:
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Gated()
    if kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
        scaler, dtype = torch.amp.GradScaler("cpu"), torch.float16
    else:
        from torch.distributed.fsdp import fully_shard

        for module in (model.inp, model.gate, model.out):
            fully_shard(module)
        fully_shard(model)
        scaler, dtype = None, torch.float16
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with precisionaudit.watch(model, opt, scaler, log_dir=log_dir, every=4) as watch:
        for step in range(STEPS):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                loss = model(batch(step, rank))
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            watch.step(loss)


if __name__ == "__main__":
    # DDP's reducer is freed and every rank is past its last collective before the process
    # group goes: destroying it with the reducer alive aborts a rank at exit now and then
    # ("terminate called without an active exception": 5 of 12 runs here without the watch)
    dist.init_process_group("gloo")
    main(sys.argv[1], sys.argv[2])
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
