"""Scale benchmark: how long a scan takes and how much memory it needs, through the CLI.

    python bench/scale_bench.py                 # large models x3 (median) + every sample model
    python bench/scale_bench.py --repeat 5 --no-samples
    python bench/scale_bench.py --no-samples --only detection   # one large model
    python bench/scale_bench.py --no-samples --only llama2 deepseek

Each scan runs ``python -m precisionaudit scan FILE --format json`` in a fresh subprocess
(the way users and CI run it: interpreter start, torch import, model build, capture,
analysis, rules, report). The "floor" row is what every such process pays before its model
(Python, ``import torch``, and ``torch._dynamo``, which ``FakeTensorMode`` imports). Wall time is measured around the subprocess; peak RSS is the
child's own ``ru_maxrss`` from ``os.wait4`` (not the running maximum over all children);
CPU s (user + system, from the same call) is the cross-check when the machine is shared.
Prints a Markdown table (the one in bench/README.md). Targets (issue 2): the two large
models under 60 s wall and 2 GiB peak RSS each on a 2-core machine, sample models in a
few seconds each; (issue 13) the eager-fallback scan of a torchvision-style detection
model under 60 s too; (issue 44) DeepSeek-V3 at its real 671 B parameters, as a Hugging Face
directory, in seconds and under 4 GiB (the 2 GiB target holds it). Exit status 1 if a scan
fails (exit 2) or a large model misses a target.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LARGE = [  # (model file, description, extra CLI arguments)
    ("bench/models/gpt_1b.py", "24-layer d=2048 transformer, 1.3 B params", []),
    ("bench/models/llama2_70b.py", "Llama-2-70B shape on meta, 69 B params", []),
    ("bench/models/llama2_70b.py", "Llama-2-70B shape on meta, pure bf16", ["--mode", "pure",
                                                                          "--dtype", "bfloat16"]),
    # NMS and proposal filtering are data-dependent: fake tensors give up, the scan runs it
    # eagerly on real tensors, CUDA's fp16 kernels emulated in fp32 arithmetic (issue 13)
    ("bench/models/detection_fasterrcnn.py", "Faster R-CNN R50-FPN, 800x800, NMS: eager fallback", []),
    # a Hugging Face directory holding transformers' default DeepSeek-V3 config.json: 671 B
    # parameters, 256 fused experts a layer, built with no tensor allocated (issue 44)
    ("bench/models/deepseek_v3_671b", "DeepSeek-V3 config.json, 671 B params (MoE), on meta", []),
]
WALL_TARGET_S, RSS_TARGET_MIB = 60.0, 2048.0


#: what every scan pays before its model: Python, torch, and torch._dynamo (FakeTensorMode imports it)
FLOOR = ["-c", "import torch; from torch._subclasses.fake_tensor import FakeTensorMode; FakeTensorMode()"]


def run_once(argv: list[str], preexec=None) -> dict:
    """One fresh ``python ARGV`` process: wall seconds, peak RSS (MiB), exit code, JSON stdout
    (``preexec``: run in the child before it starts, e.g. a memory limit)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=out, stderr=err, preexec_fn=preexec)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    report = json.loads(stdout) if proc.returncode in (0, 1) and stdout else None
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "rc": proc.returncode,
            "report": report, "stderr": stderr.strip().splitlines()[-1:] or [""]}


def scan_argv(path: str, extra: list[str]) -> list[str]:
    return ["-m", "precisionaudit", "scan", path, "--format", "json", *extra]


def measure(argv: list[str], repeat: int) -> dict:
    runs = [run_once(argv) for _ in range(repeat)]
    first = runs[0]
    model = first["report"]["models"][0] if first["report"] else {}
    return {"wall": statistics.median(r["wall"] for r in runs),
            "walls": [r["wall"] for r in runs], "cpu": statistics.median(r["cpu"] for r in runs),
            "rss_mib": max(r["rss_mib"] for r in runs),
            "rc": max(r["rc"] for r in runs),
            "nodes": model.get("nodes"), "frontend": model.get("frontend"),
            "status": model.get("status", "error"),
            "findings": len(first["report"]["findings"]) if first["report"] else None,
            "error": model.get("error") or (first["stderr"][0] if first["rc"] == 2 else None)}


def row(name: str, what: str, m: dict, targets: bool) -> str:
    ok = m["status"] == "ok" and m["rc"] in (0, 1)
    if targets:
        ok = ok and m["wall"] < WALL_TARGET_S and m["rss_mib"] < RSS_TARGET_MIB
    verdict = "ok" if ok else f"FAIL {m['error'] or ''}".strip()
    walls = "/".join(f"{w:.1f}" for w in m["walls"])
    return (f"| {name} | {what} | {m['frontend'] or '-'} | {m['nodes'] or '-'} | "
            f"{m['findings'] if m['findings'] is not None else '-'} | {m['wall']:.1f} ({walls}) | {m['cpu']:.1f} | "
            f"{m['rss_mib']:.0f} | {verdict} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per large model (median)")
    parser.add_argument("--sample-repeat", type=int, default=1, help="runs per sample model")
    parser.add_argument("--no-samples", action="store_true", help="skip sample_models/")
    parser.add_argument("--only", metavar="TEXT", nargs="+",
                        help="only the large models whose file name contains one of the TEXTs")
    args = parser.parse_args()

    print(f"precisionaudit scan benchmark: {platform.node()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, {_torch_version()}")
    header = ("| model | what | frontend | ops | findings | wall s, median (runs) | CPU s | "
              "peak RSS MiB | verdict |\n|---|---|---|---|---|---|---|---|---|")
    print(header)
    failed = False
    floor = measure(FLOOR, args.repeat)
    walls = "/".join(f"{w:.1f}" for w in floor["walls"])
    print(f"| (floor) | python + import torch + FakeTensorMode(), no scan | - | - | - | "
          f"{floor['wall']:.1f} ({walls}) | {floor['cpu']:.1f} | {floor['rss_mib']:.0f} | - |", flush=True)
    for path, what, extra in LARGE:
        if args.only and not any(text in os.path.basename(path) for text in args.only):
            continue
        m = measure(scan_argv(path, extra), args.repeat)
        line = row(os.path.basename(path), what + (" " + " ".join(extra) if extra else ""), m, True)
        failed |= "FAIL" in line
        print(line, flush=True)
    if not args.no_samples:
        samples = sorted(glob.glob(os.path.join(ROOT, "sample_models", "*.py")))
        walls = []
        for path in samples:
            m = measure(scan_argv(os.path.relpath(path, ROOT), []), args.sample_repeat)
            walls.append(m["wall"])
            line = row(os.path.basename(path), "sample model", m, False)
            failed |= "FAIL" in line
            print(line, flush=True)
        if walls:
            print(f"\nsample models: {len(walls)}, wall median {statistics.median(walls):.1f} s, "
                  f"max {max(walls):.1f} s")
    return 1 if failed else 0


def _torch_version() -> str:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return "torch " + (out.stdout.strip() or "?")


if __name__ == "__main__":
    sys.exit(main())
