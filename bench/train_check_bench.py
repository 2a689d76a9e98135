"""check --train on GPT-2 small against the same training as plain eager PyTorch.

The issue's targets: ``train_check`` with 3 variants x ``--steps`` 20 on GPT-2 small
(124M, batch 2 x 256, pure bf16, lr 1e-5, plan ``master_weights: float32``) takes at most
2x the time of the same 3 variants x 20 steps written as plain eager PyTorch (fp32 AdamW;
``model.to(bfloat16)`` + AdamW; bf16 model + AdamW over fp32 master copies), and its peak
RSS is at most 3x one fp32 training step's. Each measurement runs in its own process
(peak RSS is per process): ``python bench/train_check_bench.py [--steps N] [--layers L]
[--repeat R]`` prints medians and ratios. ``--layers`` shrinks the model for a smoke run.
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


def _eager(kind, steps, layers):
    """``kind``: one fp32 step ("step"), or the 3 variants x ``steps`` ("eager")."""
    import torch
    batch = _batch()
    torch.manual_seed(0)
    base = _model(layers).eval()

    def train(model, params, after=None):
        opt = torch.optim.AdamW(params, lr=1e-5)
        for _ in range(1 if kind == "step" else steps):
            opt.zero_grad(set_to_none=True)
            model(**batch).loss.backward()
            if after is not None:
                after(opt)
            else:
                opt.step()
    started = time.perf_counter()
    import copy
    ref = copy.deepcopy(base) if kind != "step" else base
    train(ref, ref.parameters())
    if kind == "step":
        return time.perf_counter() - started
    low = copy.deepcopy(base).to(torch.bfloat16)
    train(low, low.parameters())
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
    train(mixed, masters, master_step)
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
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(json.dumps({"kind": kind, "wall_s": wall, "peak_rss_gib": peak_gib}))


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
    med = {k: {m: statistics.median(r[m] for r in rows) for m in ("wall_s", "peak_rss_gib")}
           for k, rows in results.items()}
    print(f"GPT-2 ({args.layers} layers), batch 2x256, {args.steps} steps, median of {args.repeat}:")
    for k, v in med.items():
        print(f"  {k:6s} wall {v['wall_s']:8.1f} s   peak RSS {v['peak_rss_gib']:6.2f} GiB")
    print(f"  check / eager wall: {med['check']['wall_s'] / med['eager']['wall_s']:.2f}x (target <= 2x)")
    print(f"  check peak RSS / one fp32 step's: {med['check']['peak_rss_gib'] / med['step']['peak_rss_gib']:.2f}x "
          "(target <= 3x)")


if __name__ == "__main__":
    main(sys.argv[1:])
