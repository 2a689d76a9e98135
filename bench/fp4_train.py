"""The training part of bench/fp4_bench.py: a small LM trained on CPU in emulated NVFP4.

An 8-block pre-norm transformer LM (d=128, 4 heads, MLP 512, an nn.Linear head) learns a
Markov-chain language (64 tokens, each followed by one of 4 successors). Block 6's MLP reads a
massive activation: its norm's gain on channel 7 is 200 (Sun et al. 2024 report such channels in
every large LM), which NVFP4's 16-value blocks cannot hold (PA615). plan --dtype nvfp4 --data
names what to keep; the runs are fp32, NVFP4 as is, NVFP4 with the plan, and NVFP4 with a
control plan that keeps as many Linears from the other end of the stack. The loss gap is each
run's loss over the last tenth of the steps less fp32's.
"""
import math
import os
import sys
import tempfile
import textwrap
import time

import torch

from precisionaudit.check.pytorch.training import train_check
from precisionaudit.core.findings import PLAN_MIN_SEVERITY
from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.plan.fp4 import keep_out
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

MODEL = textwrap.dedent('''
    import torch
    import torch.nn.functional as F
    from torch import nn

    VOCAB, SEQ, D, HEADS, DEPTH = 64, 32, 128, 4, 8


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(D)
            self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
            self.norm2 = nn.LayerNorm(D)
            self.up = nn.Linear(D, 4 * D)
            self.down = nn.Linear(4 * D, D)

        def forward(self, x):
            b, t, _ = x.shape
            h = self.norm1(x)
            q, k, v = (f(h).view(b, t, HEADS, D // HEADS).transpose(1, 2) for f in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
            x = x + self.o(a)
            return x + self.down(F.gelu(self.up(self.norm2(x))))


    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D)
            self.pos = nn.Parameter(torch.randn(SEQ, D) * 0.02)
            self.layers = nn.ModuleList(Block() for _ in range(DEPTH))
            self.norm = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, VOCAB, bias=False)

        def forward(self, ids):
            h = self.embed(ids) + self.pos[: ids.shape[1]]
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm(h))


    def get_model():
        torch.manual_seed(0)
        model = TinyLM()
        with torch.no_grad():
            model.layers[6].norm2.weight[7] = 200.0  # a massive activation in block 6's MLP input
        return model


    def _chain():
        g = torch.Generator().manual_seed(1)
        successors = torch.stack([torch.randperm(VOCAB, generator=g)[:4] for _ in range(VOCAB)])
        return successors, g


    def get_batches(n=16, batch=8):
        successors, g = _chain()
        out = []
        for _ in range(n):
            ids = torch.empty(batch, SEQ, dtype=torch.long)
            ids[:, 0] = torch.randint(0, VOCAB, (batch,), generator=g)
            for t in range(1, SEQ):
                ids[:, t] = successors[ids[:, t - 1], torch.randint(0, 4, (batch,), generator=g)]
            out.append((ids,))
        return out


    def get_example_inputs():
        return get_batches(1, 4)[0]


    def get_loss(outputs, inputs):
        (ids,), _ = inputs
        return F.cross_entropy(outputs[:, :-1].reshape(-1, VOCAB).float(), ids[:, 1:].reshape(-1))
''')


def _tail(losses, share=0.1) -> float:
    tail = max(1, int(len(losses) * share))
    return sum(losses[-tail:]) / tail


def _blocks(modules) -> str:
    """"layers.6-7 (12), lm_head" for the Linears of blocks 6 and 7 and the head."""
    blocks = sorted({int(m.split(".")[1]) for m in modules if m.startswith("layers.")})
    inside = sum(m.startswith("layers.") for m in modules)
    out = [f"layers.{blocks[0]}-{blocks[-1]} ({inside})"] if blocks else []
    return ", ".join(out + [m for m in modules if not m.startswith("layers.")])


def part_train(steps: int):
    print(f"\n## train: an 8-block LM, {steps} AdamW steps (lr 1e-3) on CPU, emulated NVFP4\n")
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "markov_lm.py")
        with open(path, "w") as fh:
            fh.write(MODEL)
        sys.path.insert(0, root)
        import markov_lm

        rules = [r for r in load_rules() if r.id.startswith("PA61")]
        started = time.perf_counter()
        results, found = scan([path], Target.named("nvfp4"), rules, values=ValueOptions(data="example"))
        keep = keep_out(found, results[0].graph, PLAN_MIN_SEVERITY)
        plan_s = time.perf_counter() - started
        print(f"plan --dtype nvfp4 --data example ({plan_s:.0f} s): keeps {keep.modules} "
              f"(first {keep.first} + last {keep.last} blocks; measured past bound: {keep.failing})")
        linears = [m for m, mod in markov_lm.get_model().named_modules() if isinstance(mod, torch.nn.Linear)]
        planned = [m for m in keep.modules if m in linears]
        # as many block Linears from the other end of the stack (and the same outside it: the head)
        inside = [m for m in planned if m.startswith("layers.")]
        control = [m for m in linears if m.startswith("layers.")][:len(inside)] + \
            [m for m in planned if not m.startswith("layers.")]
        batches = [b[0] for b in markov_lm.get_batches()]
        rows = []
        for name, kept in (("the plan", planned), ("control", control)):
            plan = {"version": 1, "target": {"dtype": "nvfp4"}, "overrides": [], "keep_out_of_fp4": kept}
            t0 = time.perf_counter()
            report = train_check(markov_lm.get_model, batches, Target.named("nvfp4"), steps=steps, lr=1e-3,
                                 loss_fn=markov_lm.get_loss, plan=plan, path=path)
            seconds = time.perf_counter() - t0
            losses = {v["name"]: [x for x in v["loss"]] for v in report.variants}
            rows.append((name, kept, losses, seconds))
        ref = _tail(rows[0][2]["reference"])
        base = _tail(rows[0][2]["baseline"])
        print(f"\n| run | Linears in bf16 | final loss (last {max(1, steps // 10)} steps) | gap to fp32 |")
        print("|---|---|---:|---:|")
        print(f"| fp32 | all | {ref:.4f} | 0 |")
        print(f"| NVFP4 as is | none | {base:.4f} | {base - ref:+.4f} |")
        for name, kept, losses, seconds in rows:
            final = _tail(losses["planned"])
            print(f"| NVFP4 + {name} | {_blocks(kept)} | {final:.4f} | {final - ref:+.4f} |")
        print(f"\n(train_check: {rows[0][3]:.0f} s and {rows[1][3]:.0f} s for three runs of {steps} steps each; the "
              f"16 batches repeat, so the runs memorise them below the chain's entropy, {math.log(4):.4f} nats)")
