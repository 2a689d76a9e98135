"""A two-rank training job for precisionaudit.watch's tests, run with
``torchrun --nproc_per_node 2 watch_distributed.py KIND LOG_DIR [--identity]`` (gloo, CPU).

- ``ddp``: DDP around the gated model of watch_loops, float16 CPU autocast and GradScaler;
  only rank 1's batches from OUTLIER_STEP on are outliers: its exp overflows, DDP's
  all-reduce spreads the inf/NaN to rank 0's gradients, and both ranks skip the step;
- ``fsdp``: the same model under FSDP2 (``fully_shard``), float16 autocast and no scaler:
  the fused gradient check finds rank 1's inf/NaN (agreed across the ranks) and both ranks
  replay the step through FSDP's all-gathers and reduce-scatters;
- ``deepspeed1``/``deepspeed2``/``deepspeed3``: real DeepSpeed (``DS_ACCELERATOR=cpu``) with
  bf16 and ZeRO stage 1, 2 or 3 (its CPU accelerator refuses fp16); rank 1's outliers are
  large enough for exp to overflow bfloat16 and float32 alike (past 88.7): a failure no
  precision fixes, replayed through ZeRO-3's parameter all-gathers.

- ``fsdp_shards``: a pure-bfloat16 embedding model under FSDP2, every batch reading rows that
  live in rank 0's shard only (SGD updates small enough to round away): the lost-update share
  must be the whole parameter's, not the last rank's empty shard's;
- ``fsdp_mp``: the same model in float32 under FSDP2 with ``MixedPrecisionPolicy(param_dtype=
  torch.bfloat16)``: the run computes in bfloat16, its parameters stored in float32.

- ``ddp_accumulate``: DDP around the gated model, float16 autocast and GradScaler, two
  micro-batches a step (the first under ``no_sync``); from OUTLIER_STEP on, rank 1's first
  micro-batch is the outlier and its last one is not: the replay must name the first;
- ``ddp_residual``: DDP around watch_loops' Residual, whose block 3 fc2 overflows float16
  while the float32 residual stream holds it: the plan keeps that one Linear in float32.

``--identity``: no outlier batches, the loop run twice in the process, without the watch and
with it: each rank writes both runs' losses to ``LOG_DIR/losses_<rank>.json``, which must be
bit-identical.
"""
import contextlib
import gc
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from watch_loops import OUTLIER_SCALE, OUTLIER_STEP, Gated  # noqa: E402

import precisionaudit  # noqa: E402

STEPS = 16
#: rank 1's outliers under DeepSpeed: scores past 88.7, where bfloat16's exp overflows (as float32's)
DEEPSPEED_OUTLIER_SCALE = 400.0


def batch(step: int, rank: int, scale: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(8, 16, generator=g) * (scale if rank == 1 and step >= OUTLIER_STEP else 1.0)


def deepspeed_engine(model, stage: int):
    import deepspeed

    config = {"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True},
              "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
              "wall_clock_breakdown": False}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=1e-3),
                                           config=config)
    return engine


class Lookup(torch.nn.Module):
    """An embedding of 64 rows read through rows 0-15 only (under FSDP2: rank 0's shard), then a projection."""

    def __init__(self):
        super().__init__()
        self.embed, self.out = torch.nn.Embedding(64, 16), torch.nn.Linear(16, 1)

    def forward(self, ids):
        return self.out(self.embed(ids)).pow(2).mean()


def lookup_batch(step: int) -> torch.Tensor:
    """The same ids on every rank (so one process with this batch gets the same gradients)."""
    return torch.randint(0, 16, (8,), generator=torch.Generator().manual_seed(500 + step))


def train_lookup(log_dir: str, sharded: str | None, steps: int = 8) -> list:
    """The Lookup model trained with SGD under the watch: pure bfloat16 (``sharded`` "shards":
    FSDP2 over the bf16 parameters; None: one process), or float32 parameters under FSDP2's
    MixedPrecisionPolicy(param_dtype=bfloat16) (``sharded`` "mp")."""
    torch.manual_seed(0)
    model = Lookup()
    if sharded != "mp":
        model = model.to(torch.bfloat16)
    if sharded:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16) if sharded == "mp" else MixedPrecisionPolicy()
        fully_shard(model, mp_policy=policy)
    opt = torch.optim.SGD(model.parameters(), lr=3e-2)  # most of the embedding's updates round away in bf16
    losses = []
    with precisionaudit.watch(model, opt, log_dir=log_dir, every=2) as watch:
        for step in range(steps):
            opt.zero_grad()
            loss = model(lookup_batch(step))
            loss.backward()
            opt.step()
            watch.step(loss)
            losses.append(loss.detach().float().item())
    return losses


def train_ddp_accumulate(log_dir: str, steps: int = OUTLIER_STEP + 2) -> list:
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Gated())
    opt, scaler = torch.optim.SGD(model.parameters(), lr=1e-3), torch.amp.GradScaler("cpu")
    losses = []
    with precisionaudit.watch(model, opt, scaler, log_dir=log_dir, every=4) as watch:
        for step in range(steps):
            opt.zero_grad()
            for micro in range(2):
                x = batch(2 * step + micro, rank, 1.0)
                if rank == 1 and step >= OUTLIER_STEP and micro == 0:
                    x = x * OUTLIER_SCALE
                with model.no_sync() if micro == 0 else contextlib.nullcontext():
                    with torch.autocast("cpu", dtype=torch.float16):
                        loss = model(x) / 2
                    scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            watch.step(loss)
            losses.append(loss.detach().float().item())
    return losses


def train_ddp_residual(log_dir: str, steps: int = 3) -> list:
    from watch_loops import Residual, entropy_batch

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Residual())
    opt, scaler = torch.optim.SGD(model.parameters(), lr=1e-3), torch.amp.GradScaler("cpu")
    losses = []
    with precisionaudit.watch(model, opt, scaler, log_dir=log_dir, every=2) as watch:
        for step in range(steps):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(entropy_batch(step + 10 * dist.get_rank()))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            watch.step(loss)
            losses.append(loss.detach().float().item())
    return losses


def main(kind: str, log_dir: str | None, clean: bool) -> list:
    """The losses of one run (``log_dir`` None: without the watch)."""
    if kind in ("fsdp_shards", "fsdp_mp"):
        return train_lookup(log_dir, kind.removeprefix("fsdp_"))
    if kind == "ddp_accumulate":
        return train_ddp_accumulate(log_dir)
    if kind == "ddp_residual":
        return train_ddp_residual(log_dir)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Gated()
    scaler, dtype, engine, scale = None, torch.float16, None, OUTLIER_SCALE
    if kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
        scaler = torch.amp.GradScaler("cpu")
    elif kind == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for module in (model.inp, model.gate, model.out):
            fully_shard(module)
        fully_shard(model)
    else:
        engine, dtype, scale = deepspeed_engine(model, int(kind[-1])), None, DEEPSPEED_OUTLIER_SCALE
    opt = engine.optimizer if engine is not None else torch.optim.SGD(model.parameters(), lr=1e-3)
    watch = precisionaudit.watch(engine or model, None if engine else opt, scaler, log_dir=log_dir, every=4) \
        if log_dir else None
    losses = []
    for step in range(STEPS):
        x = batch(step, rank, 1.0 if clean else scale)
        if engine is not None:  # bf16 engine: its inputs in bf16
            loss = engine(x.bfloat16())
            engine.backward(loss)
            engine.step()
        else:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                loss = model(x)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
        if watch is not None:
            watch.step(loss)
        losses.append(loss.detach().float().item())
    if watch is not None:
        watch.close()
    return losses


if __name__ == "__main__":
    # DDP's reducer is freed and every rank is past its last collective before the process
    # group goes: destroying it with the reducer alive aborts a rank at exit now and then
    # ("terminate called without an active exception": 5 of 12 runs here without the watch)
    kind, log_dir = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    if "--identity" in sys.argv:
        losses = {"unwatched": main(kind, None, clean=True), "watched": main(kind, log_dir, clean=True)}
        with open(os.path.join(log_dir, f"losses_{dist.get_rank()}.json"), "w") as f:
            json.dump(losses, f)
    else:
        main(kind, log_dir, clean=False)
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
