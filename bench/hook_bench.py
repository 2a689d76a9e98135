"""Time the pre-commit hook over 20 model files against its floor: one torch import plus the
per-model capture, and what running each model in a child process (core.isolation) costs.

The hook runs ``precisionaudit scan FILE...`` once over every file of a commit
(``require_serial: true``), so its time should be one Python + torch start-up plus the sum
of the per-model scans, with little else; Python files that are not models must cost almost
nothing (read from source, no torch). Usage:

    python bench/hook_bench.py [--models 20] [--repeat 3] [--per-file]

``--per-file`` also times one process per model file (what the hook would cost if pre-commit
were free to split the files over several processes), which is slow.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

MODEL = textwrap.dedent('''\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
            scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            scores = scores.masked_fill(mask, {fill})
            return x + scores.softmax(-1) @ v + self.mlp(x)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, {d})
            self.blocks = nn.ModuleList(Block({d}) for _ in range({layers}))
            self.head = nn.Linear({d}, 1000)

        def forward(self, ids, mask):
            x = self.emb(ids)
            for block in self.blocks:
                x = block(x, mask)
            return self.head(x).float()


    def get_model():
        return Model()


    def get_example_inputs():
        return torch.randint(0, 1000, (2, 32)), torch.ones(32, 32, dtype=torch.bool).triu(1)
    ''')

HELPER = "import os\n\n\ndef data_dir():\n    return os.path.join(os.sep, 'data', '{i}')\n"


def generate(directory: str, count: int) -> tuple[list[str], list[str]]:
    """``count`` model files (1-4 blocks, width 64-256, half with a -1e9 mask) and as many
    plain Python files, as a commit of an ML repository would have."""
    models, helpers = [], []
    for i in range(count):
        d, layers = (64, 128, 256)[i % 3], 1 + i % 4
        fill = "-1e9" if i % 2 else "torch.finfo(scores.dtype).min"
        models.append(os.path.join(directory, f"model_{i:02d}.py"))
        with open(models[-1], "w") as fh:
            fh.write(MODEL.format(d=d, layers=layers, fill=fill))
        helpers.append(os.path.join(directory, f"util_{i:02d}.py"))
        with open(helpers[-1], "w") as fh:
            fh.write(HELPER.format(i=i))
    return models, helpers


def wall(cmd, repeat: int, cwd: str) -> float:
    """Median wall time of a command run ``repeat`` times."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


PER_MODEL = textwrap.dedent('''\
    import sys, time
    from precisionaudit.core import isolation
    from precisionaudit.core.target import Target
    from precisionaudit.core.values import NO_VALUES
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.frontend import frontend_for
    from precisionaudit.runtime.sources import DEFAULT_LOAD
    isolation.command_started()  # as the command line does: this process has not imported torch
    rules, target = load_rules(), Target()
    frontend_for(sys.argv[1]).preload_all()
    for path in sys.argv[1:]:
        frontend = frontend_for(path)
        start = time.perf_counter()
        frontend.scan(path, target, rules)  # in a forked child, as the commands run it
        middle = time.perf_counter()
        frontend.scan_here(path, target, rules, DEFAULT_LOAD, None, NO_VALUES)  # in-process
        print(middle - start, time.perf_counter() - middle)
    ''')


def per_model_times(models, cwd: str) -> tuple[list[float], list[float]]:
    """Seconds each model's scan (import of the file, capture, passes, rules) takes in one
    process where torch is already imported: in a forked child, and in-process, alternated."""
    out = subprocess.run([sys.executable, "-c", PER_MODEL, *models], cwd=cwd, check=True,
                         capture_output=True, text=True).stdout
    pairs = [tuple(map(float, line.split())) for line in out.splitlines()]
    return [child for child, _ in pairs], [here for _, here in pairs]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-file", action="store_true", help="also time one process per model")
    args = parser.parse_args(argv)
    exe = shutil.which("precisionaudit", path=os.path.dirname(sys.executable)) or "precisionaudit"
    with tempfile.TemporaryDirectory(prefix="pa-hook-bench-") as directory:
        models, helpers = generate(directory, args.models)
        models = [os.path.basename(m) for m in models]
        helpers = [os.path.basename(h) for h in helpers]
        scan = [exe, "scan", "--isolated", "--skip-non-models"]  # as the hooks run it
        rows = [("python -c 'import torch'", wall([sys.executable, "-c", "import torch"], args.repeat, directory))]
        captures, in_process = per_model_times(models, directory)
        rows.append((f"per-model scan, sum of {len(models)} (torch already imported)", sum(captures)))
        rows.append((f"  the same {len(models)} scans in-process (no child process)", sum(in_process)))
        floor = rows[0][1] + rows[1][1]
        rows.append(("floor: one torch import + per-model scans", floor))
        hook = wall(scan + models + helpers, args.repeat, directory)
        rows.append((f"hook: scan {len(models)} models + {len(helpers)} plain .py files, one process", hook))
        rows.append(("hook overhead over the floor", hook - floor))
        rows.append((f"hook on the {len(helpers)} plain .py files only (no torch)",
                     wall(scan + helpers, args.repeat, directory)))
        if args.per_file:
            start = time.perf_counter()
            for model in models:
                subprocess.run(scan + [model], cwd=directory, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            rows.append((f"one process per model file ({len(models)} processes)", time.perf_counter() - start))
    width = max(len(name) for name, _ in rows)
    print(f"{'':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.2f}")
    print(f"per-model scan in a child process: median {statistics.median(captures):.3f} s, max "
          f"{max(captures):.3f} s; in-process: median {statistics.median(in_process):.3f} s; the "
          f"isolation costs {statistics.median(c - h for c, h in zip(captures, in_process)) * 1000:.0f} ms "
          f"a model (median of the differences); process timings: median of {args.repeat} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
