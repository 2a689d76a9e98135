"""What precisionaudit.watch costs a training loop: GPT-2 small (transformers, built from its
config, random weights) trained on CPU, with and without the watch, in one run.

    python bench/watch_bench.py [--dtype bfloat16|float16] [--batch 1] [--seq 64] [--rounds 12] [--control]
    python bench/watch_bench.py --engines [ddp fsdp deepspeed1 deepspeed2 deepspeed3] [--rounds 12]

Two identical loops (same seed, same batch): one plain, one with a watch attached once for
the whole run, as a training job attaches it (attaching per measured step would time the
first step after attaching, which pays one-off costs a job pays once). Each round steps
both, in alternating order (plain first in even rounds), so that the machine's load and a
step's position hit both alike; medians per kind:

- ``plain``: the loop without the watch;
- ``sampled``: the watched loop's steps the watch samples (every ``SAMPLE_EVERY``-th: forward
  hooks, gradient, update and state measures, one read);
- ``always-on``: its other steps (skip/loss/scale bookkeeping, the references to the batch,
  and without a scaler the fused gradient check);
- the amortised cost at the default ``every=100``: always-on + (sampled - always-on) / 100;
- beside each, the time spent inside the watch's own hooks and ``step`` (``inside``),
  measured there: on a loaded machine whole-step medians move by more than the watch costs,
  the time inside it does not.

``--control`` steps the second loop without a watch: the noise floor of the same comparison.
Then a replay of a watched step with attribution (forward and backward: the worst case, a
failure in the backward) against the plain step, and the memory the watch holds between
steps (references to the last batch and to the gradient at the model's loss, its counters)
against one batch. float16 runs use torch.amp.GradScaler("cpu"), bfloat16 runs no scaler
(the fused gradient check runs every step).

``--engines``: the same comparison per engine, two ranks under torchrun (gloo, CPU), a plain
and a watched loop in each rank stepping in alternating order: DDP and FSDP2 with bf16
autocast and no scaler (the fused gradient check on every step), real DeepSpeed
(``DS_ACCELERATOR=cpu``) with bf16 and ZeRO stages 1-3 (the engine's scale read where it
skips); rank 0's medians, whole steps and inside the watch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import precisionaudit  # noqa: E402

SAMPLE_EVERY = 3  # the bench's sampling period, to time sampled steps; the cost is reported at 100


def gpt2(layers: int, seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_layer=layers)).train()


class Loop:
    def __init__(self, dtype, layers: int):
        self.model = gpt2(layers)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.dtype = dtype
        self.scaler = torch.amp.GradScaler("cpu") if dtype == torch.float16 else None
        self.watch = None

    def step(self, ids) -> float:
        """One optimizer step; its wall time."""
        started = time.perf_counter()
        self.optimizer.zero_grad()
        with torch.autocast("cpu", dtype=self.dtype):
            loss = self.model(input_ids=ids, labels=ids).loss
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        if self.watch is not None:
            self.watch.step(loss)
        return time.perf_counter() - started

class SelfTime:
    """The wall time spent inside the watch's own hooks (module, tensor and optimizer hooks)
    and ``step``, measured there, so that the machine's load and a step's position do not
    blur it as they blur whole steps."""

    HOOKS = ("_before_forward", "_after_forward", "_before_step", "_after_step", "step")

    def __init__(self):
        from precisionaudit.watch.monitor import Watch, _Keep
        from precisionaudit.watch.sampling import ForwardMaxima

        self.spent = 0.0
        for owner, name in [(Watch, n) for n in self.HOOKS] + [(ForwardMaxima, "_seen"), (_Keep, "__call__")]:
            setattr(owner, name, self._timed(getattr(owner, name)))

    def _timed(self, fn):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - started
        return timed

    def take(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


def held_bytes(watch) -> tuple[int, int]:
    """(bytes of the batches and output gradients the watch references, bytes of its counters)."""
    from torch.utils import _pytree as pytree

    refs = [t for f in watch._micro for t in pytree.tree_leaves((f.batch, f.output_grads, f.loss))
            if isinstance(t, torch.Tensor)]
    counters = [t for t in pytree.tree_leaves(watch._losses) if isinstance(t, torch.Tensor)]
    return sum(t.nbytes for t in refs), sum(t.nbytes for t in counters)


# --------------------------------------------------------------------------- per engine
ENGINES = ("ddp", "fsdp", "deepspeed1", "deepspeed2", "deepspeed3")


def engine_loop(engine: str, layers: int):
    """A GPT-2 of ``layers`` layers in ``engine`` on this rank, bf16 (DeepSpeed's CPU accelerator
    refuses fp16): (model the watch takes, its optimizer, one step's function)."""
    model = gpt2(layers)
    if engine.startswith("deepspeed"):
        import deepspeed

        config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                  "zero_optimization": {"stage": int(engine[-1])}, "zero_allow_untested_optimizer": True}
        wrapped, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-4),
                                                config=config)

        def step(ids):
            loss = wrapped(input_ids=ids, labels=ids).loss
            wrapped.backward(loss)
            wrapped.step()
            return loss
        return wrapped, None, step
    if engine == "ddp":
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard

        for block in model.transformer.h:
            fully_shard(block)
        wrapped = fully_shard(model)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4)

    def step(ids):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = wrapped(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        return loss
    return wrapped, optimizer, step


def engine_worker(engine: str, layers: int, rounds: int, seq: int) -> None:
    """Run under torchrun: a plain and a watched loop of ``engine`` stepping in alternating
    order; rank 0 prints one JSON line of medians (whole steps and inside the watch)."""
    import json

    import torch.distributed as dist

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    ids = torch.randint(0, 50257, (1, seq), generator=torch.Generator().manual_seed(dist.get_rank()))
    plain, watched = engine_loop(engine, layers), engine_loop(engine, layers)
    spent = SelfTime()
    for loop in (plain, watched):
        loop[2](ids)  # warm-up
    watch = precisionaudit.watch(watched[0], watched[1], log_dir=tempfile.mkdtemp(prefix="watch-bench-"),
                                 every=SAMPLE_EVERY)
    watched_step = watched[2]
    times = {"plain": [], "sampled": [], "always-on": []}
    inside = {"sampled": [], "always-on": []}

    def timed(step_fn, watching):
        started = time.perf_counter()
        loss = step_fn(ids)
        if watching:
            watch.step(loss)
        return time.perf_counter() - started

    timed(watched_step, True)  # the first watched step: hooks' first calls, the log's first writes
    for r in range(rounds):
        kind = "sampled" if watch.steps % SAMPLE_EVERY == 0 else "always-on"
        if r % 2 == 0:
            times["plain"].append(timed(plain[2], False))
        spent.take()
        times[kind].append(timed(watched_step, True))
        inside[kind].append(spent.take())
        if r % 2 == 1:
            times["plain"].append(timed(plain[2], False))
    watch.close()
    medians = {k: statistics.median(v) for k, v in times.items()}
    own = {k: statistics.median(v) for k, v in inside.items()}
    if dist.get_rank() == 0:
        print("ENGINE " + json.dumps({"engine": engine, "medians": medians, "inside": own, "rounds": rounds,
                                      "load": os.getloadavg()[0]}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def engines_table(engines, layers: int, rounds: int, seq: int) -> None:
    """One torchrun (2 ranks, gloo) per engine; a row each: plain step, the watch's amortised
    cost at the default every=100, whole steps and inside the watch."""
    import json
    import subprocess

    print(f"GPT-2 ({layers} layers), batch 1 x {seq} tokens per rank, bf16, AdamW, 2 ranks (gloo, CPU, one "
          f"thread each), {rounds} rounds")
    print("| engine | plain s | always-on x plain | sampled x plain | inside, always-on s | inside, sampled s | "
          "**at every=100: 1 + inside / plain** | whole steps at every=100 x plain |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for engine in engines:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                               os.path.abspath(__file__), "--worker", engine, "--layers", str(layers),
                               "--rounds", str(rounds), "--seq", str(seq)], capture_output=True, text=True,
                              env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"})
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ENGINE ")), None)
        if line is None:
            print(f"| {engine} | failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:100]} |||||||")
            continue
        row = json.loads(line[len("ENGINE "):])
        m, own = row["medians"], row["inside"]
        base = m["plain"]
        own_amortised = own["always-on"] + (own["sampled"] - own["always-on"]) / 100
        whole = m["always-on"] + (m["sampled"] - m["always-on"]) / 100
        print(f"| {engine} | {base:.3f} | {m['always-on'] / base:.3f} | {m['sampled'] / base:.3f} | "
              f"{own['always-on']:.4f} | {own['sampled']:.4f} | **{1 + own_amortised / base:.4f}** | "
              f"{whole / base:.3f} |", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 small has 12 (fewer: a quick try)")
    parser.add_argument("--control", action="store_true",
                        help="the second loop without a watch: the noise floor of the comparison (A/A)")
    parser.add_argument("--engines", nargs="*", choices=ENGINES, metavar="ENGINE",
                        help=f"instead: one two-rank torchrun per engine ({', '.join(ENGINES)}; none named: all), "
                             "bf16, --layers 4 unless given")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return engine_worker(args.worker, args.layers, args.rounds, args.seq)
    if args.engines is not None:
        layers = args.layers if "--layers" in sys.argv else 4
        return engines_table(args.engines or ENGINES, layers, args.rounds, args.seq)
    dtype = getattr(torch, args.dtype)
    log_dir = tempfile.mkdtemp(prefix="watch-bench-")
    plain, watched = Loop(dtype, args.layers), Loop(dtype, args.layers)
    ids = torch.randint(0, 50257, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))
    times = {"plain": [], "sampled": [], "always-on": []}
    inside = {"sampled": [], "always-on": []}
    spent = SelfTime()
    plain.step(ids)  # warm-up of the kernels
    watched.step(ids)
    if not args.control:
        watched.watch = precisionaudit.watch(watched.model, watched.optimizer, watched.scaler,
                                             log_dir=tempfile.mkdtemp(dir=log_dir), every=SAMPLE_EVERY)
        watched.step(ids)  # the first watched step: hooks' first calls, the log's first writes
    for r in range(args.rounds):
        kind = "sampled" if watched.watch is not None and watched.watch.steps % SAMPLE_EVERY == 0 else "always-on"
        if args.control:
            kind = "sampled" if r % SAMPLE_EVERY == 0 else "always-on"
        if r % 2 == 0:
            times["plain"].append(plain.step(ids))
        spent.take()
        times[kind].append(watched.step(ids))
        inside[kind].append(spent.take())
        if r % 2 == 1:
            times["plain"].append(plain.step(ids))
    if watched.watch is not None:
        watched.watch.close()
        watched.watch = None
    medians = {k: statistics.median(v) for k, v in times.items()}
    own = {k: statistics.median(v) for k, v in inside.items()}
    base = medians["plain"]
    amortised = medians["always-on"] + (medians["sampled"] - medians["always-on"]) / 100
    own_amortised = own["always-on"] + (own["sampled"] - own["always-on"]) / 100
    if args.control:
        print(f"A/A control (the second loop without a watch): {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
        for kind, values in times.items():
            print(f"{kind:<12} {len(values)} steps, median {medians[kind]:.3f} s, x plain {medians[kind] / base:.3f}")
        return

    from precisionaudit.watch.replay import replay

    loop = watched
    w = precisionaudit.watch(loop.model, loop.optimizer, loop.scaler, log_dir=tempfile.mkdtemp(dir=log_dir))
    loop.watch = w
    loop.step(ids)
    started = time.perf_counter()
    last = w._micro[-1]
    result = replay(w.runnable, w.names, last.batch, last.rng, last.autocast, last.output_grads)
    replay_s = time.perf_counter() - started
    batch_bytes = ids.nbytes * 2  # input_ids and labels
    refs, counters = held_bytes(w)
    w.close()

    print(f"GPT-2 small ({args.layers} layers), batch {args.batch} x {args.seq} tokens, {args.dtype} CPU autocast"
          f"{', GradScaler' if dtype == torch.float16 else ', no scaler (fused gradient check on)'}, AdamW; "
          f"{args.rounds} rounds, torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<34}{'steps':>6}{'median s':>11}{'x plain':>9}{'inside s':>11}{'1 + inside/plain':>18}")
    for kind in ("plain", "always-on", "sampled"):
        extra = (f"{own[kind]:>11.3f}{1 + own[kind] / base:>18.4f}" if kind in own else "")
        print(f"{kind:<34}{len(times[kind]):>6}{medians[kind]:>11.3f}{medians[kind] / base:>9.3f}{extra}")
    print(f"{'always-on + sampling at every=100':<34}{'':>6}{amortised:>11.3f}{amortised / base:>9.3f}"
          f"{own_amortised:>11.3f}{1 + own_amortised / base:>18.4f}")
    print(f"{'replay (forward + backward)':<34}{1:>6}{replay_s:>11.3f}{replay_s / base:>9.2f}"
          f"   first non-finite: {result['first']}")
    print(f"memory held between steps: {refs} B of references (batch {batch_bytes} B, output gradients), "
          f"{counters} B of counters, per-module accumulators only on sampled steps")


if __name__ == "__main__":
    main()
