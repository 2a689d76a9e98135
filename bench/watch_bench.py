"""What precisionaudit.watch costs a training loop: GPT-2 small (transformers, built from its
config, random weights) trained on CPU, with and without the watch, in one run.

    python bench/watch_bench.py [--dtype bfloat16|float16] [--batch 1] [--seq 64] [--rounds 6] [--control]

One model and one optimizer take every step, so that no second copy's memory biases the
comparison. Each round is a plain step and a watched segment (a watch attached, two steps,
closed), in alternating order (plain first in even rounds, last in odd ones), so that the
machine's load and the step's position hit both alike; medians per kind:

- ``plain``: the loop without the watch;
- ``sampled``: the segment's first step, which the watch samples (forward hooks, gradient,
  update and state measures, one read);
- ``always-on``: the segment's second step (skip/loss/scale bookkeeping, the references to
  the batch, and without a scaler the fused gradient check);
- the amortised cost at the default ``every=100``: always-on + (sampled - always-on) / 100;
- beside each, the time spent inside the watch's own hooks and ``step`` (``inside``),
  measured there: on a loaded machine whole-step medians move by more than the watch costs,
  the time inside it does not.

``--control`` runs the segments without a watch: the noise floor of the same comparison.
Then a replay of a watched step with attribution (forward and backward: the worst case, a
failure in the backward) against the plain step, and the memory the watch holds between
steps (references to the last batch and to the gradient at the model's loss, its counters)
against one batch. float16 runs use torch.amp.GradScaler("cpu"), bfloat16 runs no scaler
(the fused gradient check runs every step).
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

    def segment(self, ids, log_dir: str, watched: bool, inside: SelfTime) -> tuple[tuple, tuple]:
        """((sampled step, its time inside the watch), (always-on step, its time inside the
        watch)) of a watch attached for two steps (``watched``)."""
        if watched:
            self.watch = precisionaudit.watch(self.model, self.optimizer, self.scaler,
                                              log_dir=tempfile.mkdtemp(dir=log_dir))
        inside.take()
        sampled = self.step(ids), inside.take()
        always_on = self.step(ids), inside.take()
        if watched:
            self.watch.close()
            self.watch = None
        return sampled, always_on


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
    parser.add_argument("--control", action="store_true",
                        help="segments without a watch: the noise floor of the comparison (A/A)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    log_dir = tempfile.mkdtemp(prefix="watch-bench-")
    loop = Loop(dtype, args.layers)
    ids = torch.randint(0, 50257, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))
    times = {"plain": [], "sampled": [], "always-on": []}
    inside = {"sampled": [], "always-on": []}
    spent = SelfTime()
    loop.step(ids)  # warm-up of the kernels
    for r in range(args.rounds):
        if r % 2 == 0:
            times["plain"].append(loop.step(ids))
        for kind, (wall, own) in zip(("sampled", "always-on"),
                                     loop.segment(ids, log_dir, watched=not args.control, inside=spent)):
            times[kind].append(wall)
            inside[kind].append(own)
        if r % 2 == 1:
            times["plain"].append(loop.step(ids))
    medians = {k: statistics.median(v) for k, v in times.items()}
    own = {k: statistics.median(v) for k, v in inside.items()}
    base = medians["plain"]
    amortised = medians["always-on"] + (medians["sampled"] - medians["always-on"]) / 100
    own_amortised = own["always-on"] + (own["sampled"] - own["always-on"]) / 100
    if args.control:
        print(f"A/A control (segments without a watch): {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
        for kind, values in times.items():
            print(f"{kind:<12} {len(values)} steps, median {medians[kind]:.3f} s, x plain {medians[kind] / base:.3f}")
        return

    from precisionaudit.watch.replay import replay

    w = precisionaudit.watch(loop.model, loop.optimizer, loop.scaler, log_dir=tempfile.mkdtemp(dir=log_dir))
    loop.watch = w
    loop.step(ids)
    started = time.perf_counter()
    result = replay(w.runnable, w.names, w._batch, w._rng, w._autocast, w._output_grads)
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
