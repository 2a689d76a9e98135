"""check --train's demonstrations under real CUDA AMP against the CPU emulation.

Runs each demonstration of tests/test_check_train.py twice on a machine with a GPU:
``device="cuda"`` (``torch.autocast("cuda")``, ``torch.amp.GradScaler("cuda")``, the
model and optimizer state on the GPU) and ``device="cpu-emulated"`` (what a machine
without one runs), each with the plan ``training_plan`` writes from that run's own
findings, and prints whether the verdicts (baseline status, planned status, findings by
rule and module) agree. ``python bench/train_check_cuda.py [--json FILE]``.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))

from test_check_train import (  # noqa: E402
    AUTOCAST_FP16, MLP, PURE_BF16, PURE_FP16, EmbeddingNet, NormNet, _tiny_loss, _x)

from precisionaudit.check.pytorch.training import train_check  # noqa: E402
from precisionaudit.plan.training import training_plan  # noqa: E402


def _gpt2():
    import transformers
    config = transformers.GPT2Config(vocab_size=128, n_positions=16, n_embd=64, n_layer=1, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return lambda: transformers.GPT2LMHeadModel(config)


def cases():
    ids = torch.randint(0, 16, (4, 8), generator=torch.Generator().manual_seed(0))
    gpt_ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-4, eps=1e-6)  # noqa: E731
    return [
        ("norm stall, pure bf16", NormNet, _x(8, 16), PURE_BF16, {"steps": 8, "lr": 1e-4}),
        ("adam eps NaN, pure fp16", EmbeddingNet, ids, PURE_FP16, {"steps": 6}),
        ("exp_avg_sq underflow, pure fp16", MLP, _x(16, 32), PURE_FP16, {"steps": 8, "optimizer_factory": adamw}),
        ("no scaler, autocast fp16", MLP, _x(64, 32), AUTOCAST_FP16,
         {"steps": 8, "lr": 1e-3, "loss_fn": _tiny_loss, "scaler": False}),
        ("default GradScaler, autocast fp16", MLP, _x(64, 32), AUTOCAST_FP16,
         {"steps": 8, "lr": 1e-3, "loss_fn": _tiny_loss}),
        ("GPT-2 pure bf16 lr 1e-5", _gpt2(), {"input_ids": gpt_ids, "labels": gpt_ids}, PURE_BF16,
         {"steps": 4, "lr": 1e-5}),
    ]


def verdict(model, batch, target, kwargs, device):
    started = time.perf_counter()
    report = train_check(model, batch, target, device=device, **kwargs)
    plan = training_plan(report.findings, target.as_dict())
    proved = train_check(model, batch, target, device=device, plan=plan, **kwargs) if report.findings else None
    return {"device": report.device, "baseline": report.variant("baseline")["status"],
            "findings": sorted({f"{f.rule} {f.module}" for f in report.findings}),
            "plan": plan.to_dict(), "planned": proved.variant("planned")["status"] if proved else None,
            "wall_s": round(time.perf_counter() - started, 2)}


def main(argv):
    rows = []
    for name, model, batch, target, kwargs in cases():
        row = {"case": name}
        for device in ("cuda", "cpu-emulated"):
            try:
                row[device] = verdict(model, batch, target, kwargs, device)
            except Exception as exc:  # noqa: BLE001 - a failure is a result here
                row[device] = {"error": f"{type(exc).__name__}: {exc}"}
        keys = ("baseline", "findings", "planned")
        row["agree"] = all(row["cuda"].get(k) == row["cpu-emulated"].get(k) for k in keys)
        rows.append(row)
        print(json.dumps(row), flush=True)
    info = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "torch": torch.__version__, "cases": rows}
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as fh:
            json.dump(info, fh, indent=1)
    print(f"{sum(r['agree'] for r in rows)}/{len(rows)} verdicts agree on {info['gpu']} (torch {info['torch']})")


if __name__ == "__main__":
    main(sys.argv[1:])
