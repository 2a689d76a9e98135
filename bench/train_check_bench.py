"""check --train on GPT-2 small against the same training as plain eager PyTorch.

The issue's targets: ``train_check`` with 3 variants x ``--steps`` 20 on GPT-2 small
(124M, batch 2 x 256, pure bf16, lr 1e-5, plan ``master_weights: float32``) takes at most
2x the time of the same 3 variants x 20 steps written as plain eager PyTorch (fp32 AdamW;
``model.to(bfloat16)`` + AdamW; bf16 model + AdamW over fp32 master copies), and its peak
RSS is at most 3x one fp32 training step's. Each measurement runs in its own process
(peak RSS is per process): ``python bench/train_check_bench.py [--steps N] [--layers L]
[--repeat R]`` prints medians and ratios. ``--layers`` shrinks the model for a smoke run.

The eager bf16 variants compute what the check computes, at the least cost: bf16 storage
(weights, activations, gradients, optimizer state), and each GEMM (the ops of the
emulation's FP32_COMPUTE: the GPU's tensor-core numerics) on the exact fp32 widening of its
bf16 inputs, rounded once to bf16 (``Bf16Gemms``: one name test per op, nothing else).
CPU's own bf16 GEMMs would be ~50x slower than that on a CPU without bf16 matrix units,
and would make the comparison say nothing about the check's own cost.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def _model(layers):
    import transformers
    config = transformers.GPT2Config(n_layer=layers, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


def _batch():
    import torch
    ids = torch.randint(0, 50257, (2, 256), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}


def _bf16_gemms():
    """A dispatch mode that computes each GEMM of bf16 tensors as a GPU does: on their exact
    fp32 widening, the result rounded to bf16 (the check's emulation does the same per op,
    with its checks; this is the least plain PyTorch needs for the same numbers)."""
    import torch
    from torch.utils import _pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    from precisionaudit.runtime.pytorch.emulation import FP32_COMPUTE

    class Bf16Gemms(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.overloadpacket.__name__ not in FP32_COMPUTE:
                return func(*args, **kwargs)
            wide = pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype == torch.bfloat16 else t,
                                        (args, kwargs))
            out = func(*wide[0], **wide[1])
            return pytree.tree_map_only(torch.Tensor, lambda t: t.to(torch.bfloat16)
                                        if t.dtype == torch.float32 else t, out)
    return Bf16Gemms


def _eager(kind, steps, layers):
    """``kind``: one fp32 step ("step"), or the 3 variants x ``steps`` ("eager")."""
    import contextlib
    import copy

    import torch
    batch = _batch()
    gemms = _bf16_gemms()
    started = time.perf_counter()  # the model is built inside the timing, as train_check builds it
    torch.manual_seed(0)
    base = _model(layers).eval()

    def train(model, params, after=None, low=False):
        opt = torch.optim.AdamW(params, lr=1e-5)
        for _ in range(1 if kind == "step" else steps):
            opt.zero_grad(set_to_none=True)
            with (gemms() if low else contextlib.nullcontext()):
                model(**batch).loss.backward()
            if after is not None:
                after(opt)
            else:
                opt.step()
    ref = copy.deepcopy(base) if kind != "step" else base
    train(ref, ref.parameters())
    if kind == "step":
        return time.perf_counter() - started
    low = copy.deepcopy(base).to(torch.bfloat16)
    train(low, low.parameters(), low=True)
    mixed = copy.deepcopy(base)
    masters = [torch.nn.Parameter(p.detach().clone()) for p in mixed.parameters()]
    mixed.to(torch.bfloat16)

    def master_step(opt):
        for p, m in zip(mixed.parameters(), masters):
            m.grad = None if p.grad is None else p.grad.float()
        opt.step()
        with torch.no_grad():
            for p, m in zip(mixed.parameters(), masters):
                p.copy_(m)
    train(mixed, masters, master_step, low=True)
    return time.perf_counter() - started


def _check(steps, layers):
    import torch  # noqa: F401
    from precisionaudit.check.pytorch.training import train_check
    from precisionaudit.core.target import Target
    started = time.perf_counter()
    report = train_check(lambda: _model(layers), _batch(), Target("bfloat16", "pure"), steps=steps, lr=1e-5,
                         device="cpu-emulated", plan={"version": 1, "master_weights": "float32"})
    wall = time.perf_counter() - started
    print(json.dumps({"passed": report.passed, "baseline": report.variant("baseline")["status"],
                      "findings": len(report.findings)}), file=sys.stderr)
    return wall


def child(kind, steps, layers):
    wall = _check(steps, layers) if kind == "check" else _eager(kind, steps, layers)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # CPU time next to wall time: on a shared machine the wall time is the other jobs' too
    print(json.dumps({"kind": kind, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                      "peak_rss_gib": usage.ru_maxrss / 2 ** 20}))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child")
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.steps, args.layers)
    results = {}
    for _ in range(args.repeat):
        for kind in ("step", "eager", "check"):
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--steps", str(args.steps),
                                  "--layers", str(args.layers)], capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            results.setdefault(kind, []).append(row)
            print(json.dumps(row), out.stderr.strip().splitlines()[-1] if kind == "check" else "", flush=True)
    med = {k: {m: statistics.median(r[m] for r in rows) for m in ("wall_s", "cpu_s", "peak_rss_gib")}
           for k, rows in results.items()}
    print(f"GPT-2 ({args.layers} layers), batch 2x256, {args.steps} steps, median of {args.repeat}:")
    for k, v in med.items():
        print(f"  {k:6s} wall {v['wall_s']:8.1f} s   process CPU {v['cpu_s']:8.1f} s   "
              f"peak RSS {v['peak_rss_gib']:6.2f} GiB")
    print(f"  check / eager wall: {med['check']['wall_s'] / med['eager']['wall_s']:.2f}x (target <= 2x); "
          f"process CPU: {med['check']['cpu_s'] / med['eager']['cpu_s']:.2f}x")
    print(f"  check peak RSS / one fp32 step's: {med['check']['peak_rss_gib'] / med['step']['peak_rss_gib']:.2f}x "
          "(target <= 3x)")


if __name__ == "__main__":
    main(sys.argv[1:])
