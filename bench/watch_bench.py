"""What precisionaudit.watch costs a training loop: GPT-2 small (transformers, built from its
config, random weights) trained on CPU, with and without the watch, in one run.

    python bench/watch_bench.py [--dtype bfloat16|float16] [--batch 1] [--seq 64] [--rounds 6]

Two copies of the model, identically initialised, take steps in turn (plain, watched,
plain, watched, ...), so that the load of the machine hits both alike; medians per kind:

- ``plain``: the loop without the watch;
- ``always-on``: a watched step that is not sampled (skip/loss/scale bookkeeping, the
  references to the batch, and without a scaler the fused gradient check);
- ``sampled``: a watched step with the per-module statistics (forward hooks, gradient,
  update and state measures, one read);
- the amortised cost at the default ``every=100``: always-on + (sampled - always-on) / 100.

Then a replay of the last watched step with attribution (forward and backward: the worst
case, a failure in the backward) against the plain step, and the memory the watch holds
between steps (references to the last batch and to the gradients at the model's outputs,
and its counters) against one batch. float16 runs use torch.amp.GradScaler("cpu"),
bfloat16 runs no scaler (the fused gradient check runs every step).
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
    def __init__(self, dtype, watched: bool, log_dir: str, layers: int):
        self.model = gpt2(layers)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.dtype = dtype
        self.scaler = torch.amp.GradScaler("cpu") if dtype == torch.float16 else None
        self.watch = (precisionaudit.watch(self.model, self.optimizer, self.scaler, log_dir=log_dir,
                                           every=SAMPLE_EVERY) if watched else None)
        self.steps = 0

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
        self.steps += 1
        return time.perf_counter() - started


def held_bytes(watch) -> tuple[int, int]:
    """(bytes of the batch and output gradients the watch references, bytes of its counters)."""
    from torch.utils import _pytree as pytree

    refs = [t for t in pytree.tree_leaves((watch._batch, watch._output_grads)) if isinstance(t, torch.Tensor)]
    counters = [t for t in pytree.tree_leaves(watch._losses) if isinstance(t, torch.Tensor)]
    return sum(t.nbytes for t in refs), sum(t.nbytes for t in counters)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 small has 12 (fewer: a quick try)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    log_dir = tempfile.mkdtemp(prefix="watch-bench-")
    plain, watched = Loop(dtype, False, log_dir, args.layers), Loop(dtype, True, log_dir, args.layers)
    ids = torch.randint(0, 50257, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))
    times = {"plain": [], "always-on": [], "sampled": []}
    plain.step(ids)  # warm-up of the kernels (the watched copy's step 0 is a sampled one)
    for _ in range(args.rounds):
        times["plain"].append(plain.step(ids))
        sampled = watched.steps % SAMPLE_EVERY == 0
        times["sampled" if sampled else "always-on"].append(watched.step(ids))
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    base = medians["plain"]
    amortised = medians["always-on"] + (medians.get("sampled", medians["always-on"]) - medians["always-on"]) / 100

    from precisionaudit.watch.replay import replay

    w = watched.watch
    started = time.perf_counter()
    result = replay(w.runnable, w.names, w._batch, w._rng, w._autocast, w._output_grads)
    replay_s = time.perf_counter() - started
    batch_bytes = ids.nbytes * 2  # input_ids and labels
    refs, counters = held_bytes(w)
    w.close()

    print(f"GPT-2 small ({args.layers} layers), batch {args.batch} x {args.seq} tokens, {args.dtype} CPU autocast"
          f"{', GradScaler' if dtype == torch.float16 else ', no scaler (fused gradient check on)'}, AdamW; "
          f"{args.rounds} rounds, torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<34}{'steps':>6}{'median s':>11}{'x plain':>9}")
    for kind in ("plain", "always-on", "sampled"):
        if kind in medians:
            print(f"{kind:<34}{len(times[kind]):>6}{medians[kind]:>11.3f}{medians[kind] / base:>9.3f}")
    print(f"{'always-on + sampling at every=100':<34}{'':>6}{amortised:>11.3f}{amortised / base:>9.3f}")
    print(f"{'replay (forward + backward)':<34}{1:>6}{replay_s:>11.3f}{replay_s / base:>9.2f}"
          f"   first non-finite: {result['first']}")
    print(f"memory held between steps: {refs} B of references (batch {batch_bytes} B, output gradients), "
          f"{counters} B of counters, per-module accumulators only on sampled steps")


if __name__ == "__main__":
    main()
