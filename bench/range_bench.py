"""Range-pass benchmark (issue 10): the value-aware audit's cost on a 1.3 B-parameter model.

    python bench/range_bench.py                    # 1 round; --repeat 3 for medians
    python bench/range_bench.py --keep /tmp/w      # keep (and reuse) the safetensors file

bench/models/gpt_1b_calibration.py (gpt_1b.py's 24-layer d=2048 transformer, built on
``meta``) gets random weights written once to a safetensors file (5.2 GB in fp32). Then, each
in a fresh process so that peak RSS is its own (``ru_maxrss`` from ``os.wait4``):

* ``plain``: the weights loaded as ``--weights`` loads them, then 8 fp32 forwards over the 8
  calibration batches (128 tokens each) under ``torch.no_grad()``;
* ``range``: the same load, then the range pass (``measure_model``: per-op statistics of
  every result on each batch, and the low-precision run for the batches that need it).

Prints a Markdown table. Targets: the range pass at most 2x the 8 plain forwards, and the
range process's peak RSS at most the model's size + 1 GiB. Exit status 1 if one is missed.

``--baseline DIR`` (both modes): DIR holds another checkout's ``precisionaudit`` package (for
instance ``git archive main precisionaudit | tar -x -C DIR``); its range pass runs beside this
checkout's, interleaved round by round (plain, range, baseline range), so that both face the
same load. Each run also reports its CPU seconds (user + system), steadier than wall time on a
shared machine.

``--offload`` (``--keep DIR`` to keep the shards): bench/models/gpt_offload_calibration.py,
64 of those blocks (3.3 B parameters, 13 GB of fp32 safetensors shards written block by
block, more than half of a 24 GiB machine), profiled by ``precisionaudit scan --weights DIR
--data calibration_batches`` in a child process: accelerate dispatches it with disk offload
(capture/pytorch/offload.py). Prints the checkpoint's size against the machine's memory,
the scan's wall time and peak RSS; exit status 1 if the scan fails or its peak RSS is not
below the checkpoint's size.

``--small`` (issue 25: the run under the target on every batch): bench/models/gpt2_small.py
(124 M parameters, Hugging Face's GPT-2 with random weights, 1 x 64 tokens): 2 plain fp32
forwards against the range pass over the same 2 batches (autocast fp16), each round in a
fresh process (after one untimed run of each), ``--repeat`` rounds; prints the medians and
their ratio (target <= 2x), and the ratio of the same forwards under the target policy alone
(CUDA's fp16 autocast and kernels emulated on CPU, nothing recorded): the part of the range
pass's cost that is the emulated forward itself.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "models", "gpt_1b_calibration.py")
TIME_RATIO_TARGET, RSS_OVER_MODEL_GIB = 2.0, 1.0


def child(kind: str, weights: str) -> dict:
    """One measurement, run inside a child process."""
    import torch

    from precisionaudit.capture.pytorch.calibration import measure_model
    from precisionaudit.core.numerics import Target
    from precisionaudit.core.values import ValueOptions
    from precisionaudit.runtime.pytorch.source import open_source

    if kind == "small":
        return small_child()
    torch.manual_seed(0)
    source = open_source(MODEL)
    module = source.module
    if kind == "write":
        model = module.GPT()  # real tensors: random init
        from safetensors.torch import save_model
        save_model(model, weights)
        return {"params": sum(p.numel() for p in model.parameters())}
    started = time.perf_counter()
    model = source.build_loaded(weights)
    out = {"load_s": time.perf_counter() - started,
           "model_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}
    with _timed(out):
        if kind == "plain":
            with torch.no_grad():
                for (ids,) in module.calibration_batches():
                    model(ids)
        else:
            values = ValueOptions(weights=weights, data="calibration_batches")
            measured = measure_model(model, source, Target("float16", "autocast", "cuda"), values)
    if kind == "range":
        out |= _counts(measured)
    return out


class _timed:
    """Wall and CPU seconds (user + system, all threads) of the block, into ``out``."""

    def __init__(self, out: dict, suffix: str = ""):
        self.out, self.suffix = out, suffix

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), _cpu_seconds()

    def __exit__(self, *exc):
        self.out[f"run_s{self.suffix}"] = time.perf_counter() - self.wall
        self.out[f"cpu_s{self.suffix}"] = _cpu_seconds() - self.cpu


def _cpu_seconds() -> float:
    usage = os.times()
    return usage.user + usage.system


def _counts(measured) -> dict:
    """What the range pass ran: ops measured, batches, and the runs of each kind."""
    return {"ops": len(measured.target_calls or measured.calls), "batches": measured.batches,
            "low_runs": measured.low_runs, "reference_runs": getattr(measured, "reference_runs", measured.batches)}


def run_child(kind: str, weights: str, package: str | None = None) -> dict:
    """``child(kind, weights)`` in a fresh process, importing ``precisionaudit`` from
    ``package``'s directory when given (a baseline checkout), else from this checkout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package or os.path.dirname(HERE),
                                                       os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    with tempfile.TemporaryFile() as stdout:
        proc = subprocess.Popen([sys.executable, __file__, "--child", kind, weights], stdout=stdout, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        stdout.seek(0)
        text = stdout.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"range_bench: the {kind} run ({package or 'this checkout'}) failed")
    return {**json.loads(text.strip().splitlines()[-1]), "rss_gib": usage.ru_maxrss / 2**20}


OFFLOAD_MODEL = os.path.join(HERE, "models", "gpt_offload_calibration.py")


def write_shards(directory: str) -> int:
    """The offload model's random weights as a sharded safetensors directory with its index,
    written one block at a time (never the whole model in memory). Returns the bytes written."""
    import torch
    from safetensors.torch import save_file

    from precisionaudit.runtime.pytorch.model_file import import_model_file

    model = import_model_file(OFFLOAD_MODEL).get_model()  # on meta: names and shapes only
    groups: dict[str, list] = {}
    for name, p in model.named_parameters():  # tied weights once
        key = ".".join(name.split(".")[:2]) if name.startswith("blocks.") else "rest"
        groups.setdefault(key, []).append((name, p.shape))
    generator = torch.Generator().manual_seed(0)
    weight_map, total = {}, 0
    for i, (key, params) in enumerate(groups.items()):
        shard = f"model-{i:05d}.safetensors"
        tensors = {}
        for name, shape in params:
            if len(shape) >= 2:
                tensors[name] = torch.randn(shape, generator=generator) * 0.02
            else:
                tensors[name] = torch.ones(shape) if name.endswith("weight") else torch.zeros(shape)
            weight_map[name] = shard
        save_file(tensors, os.path.join(directory, shard))
        total += sum(t.numel() * 4 for t in tensors.values())
        del tensors
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh)
    return total


def offload_run(directory: str) -> dict:
    """``precisionaudit scan --weights DIR --data calibration_batches`` in a child process:
    its wall time, peak RSS and exit status (1: findings; 2 would be an error)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "precisionaudit", "scan", OFFLOAD_MODEL,
                                 "--weights", directory, "--data", "calibration_batches",
                                 "--select", "PA301,PA302,PA303", "--format", "json"],
                                stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read().decode(), stderr.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"range_bench: the offloaded scan failed ({code}): {err.strip()[-500:]}")
    report = json.loads(out)
    return {"wall_s": time.perf_counter() - started, "rss_gib": usage.ru_maxrss / 2**20,
            "status": report["models"][0]["status"], "findings": len(report["findings"])}


SMALL_MODEL = os.path.join(HERE, "models", "gpt2_small.py")
SMALL_BATCHES, SMALL_SHAPE = 2, (1, 64)  # small enough for a shared 2-core machine


def small_child() -> dict:
    """GPT-2 small's plain forwards, the same forwards under the target policy alone and the
    range pass, timed in this process after one untimed run of each (the first run of a
    process pays for its lazy set-up)."""
    import torch

    from precisionaudit.capture.pytorch.calibration import measure_model
    from precisionaudit.core.numerics import Target
    from precisionaudit.core.values import ValueOptions
    from precisionaudit.runtime.pytorch.cuda_autocast import autocast_policy
    from precisionaudit.runtime.pytorch.execution import Runtime, numerics
    from precisionaudit.runtime.pytorch.source import open_source

    source = open_source(SMALL_MODEL)
    module = source.module
    torch.manual_seed(0)
    model = module.get_model().eval()
    (ids, *rest) = module.get_example_inputs()
    ids = ids[:SMALL_SHAPE[0], :SMALL_SHAPE[1]]
    generator = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, int(ids.max()) + 1, ids.shape, generator=generator), *rest)
            for _ in range(SMALL_BATCHES)]
    module.calibration_batches = lambda: iter(data)

    def plain():
        with torch.no_grad():
            for batch in data:
                model(*batch)

    target = Target("float16", "autocast", "cuda")
    runtime = Runtime("cpu-emulated", "cuda", torch.device("cpu"))

    def target_forwards():  # the forwards under the target alone, nothing recorded: the pass's floor
        for batch in data:
            with torch.no_grad(), numerics(runtime), autocast_policy(target, runtime.name):
                model(*batch)

    def ranged():
        return measure_model(model, source, target, ValueOptions(data="calibration_batches"))

    plain(), target_forwards(), ranged()
    out = {}
    with _timed(out, "_plain"):
        plain()
    with _timed(out, "_target"):
        target_forwards()
    with _timed(out, "_range"):
        measured = ranged()
    return out | _counts(measured)


def small_bench(repeat: int, baseline: str | None) -> int:
    packages = {"range": None, **({"baseline": baseline} if baseline else {})}
    runs = {kind: [] for kind in packages}
    for _ in range(repeat):  # interleaved: the machine's load hits both alike
        for kind, package in packages.items():
            runs[kind].append(run_child("small", "-", package))
    print(f"| GPT-2 small, {SMALL_BATCHES} batches x {SMALL_SHAPE} tokens (median of {repeat}) | "
          "plain (s) | range pass (s) | ratio | plain CPU (s) | range CPU (s) | CPU ratio | "
          "fp16 forwards alone / plain | reference runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    ratios = {}
    for kind, package in packages.items():
        rows = runs[kind]

        def median(key):
            return statistics.median(r[key] for r in rows)

        ratios[kind] = statistics.median(r["run_s_range"] / r["run_s_plain"] for r in rows)
        cpu_ratio = statistics.median(r["cpu_s_range"] / r["cpu_s_plain"] for r in rows)
        floor = statistics.median(r["run_s_target"] / r["run_s_plain"] for r in rows)
        print(f"| {package or 'this checkout'} | {median('run_s_plain'):.2f} | {median('run_s_range'):.2f} | "
              f"{ratios[kind]:.2f}x | {median('cpu_s_plain'):.2f} | {median('cpu_s_range'):.2f} | "
              f"{cpu_ratio:.2f}x | {floor:.2f}x | {rows[-1]['reference_runs']} of {rows[-1]['batches']} |")
    print(f"\nrange pass / plain forwards (median of the rounds' ratios): {ratios['range']:.2f}x "
          f"(target <= {TIME_RATIO_TARGET:.0f}x); {rows[-1]['ops']} ops measured")
    return 0 if ratios["range"] <= TIME_RATIO_TARGET else 1


def offload_bench(directory: str | None) -> int:
    import psutil

    directory = directory or tempfile.mkdtemp(prefix="range_bench-offload-")
    os.makedirs(directory, exist_ok=True)
    if not os.path.exists(os.path.join(directory, "model.safetensors.index.json")):
        started = time.perf_counter()
        written = write_shards(directory)
        print(f"wrote {written / 2**30:.1f} GiB of shards to {directory} in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
               if f.endswith(".safetensors"))
    machine = psutil.virtual_memory().total
    available = psutil.virtual_memory().available
    run = offload_run(directory)
    print("| checkpoint (GiB) | machine memory (GiB) | available at start (GiB) | scan wall (s) | "
          "peak RSS (GiB) | status |")
    print("|---:|---:|---:|---:|---:|---|")
    print(f"| {size / 2**30:.1f} | {machine / 2**30:.1f} | {available / 2**30:.1f} | {run['wall_s']:.0f} | "
          f"{run['rss_gib']:.2f} | {run['status']} |")
    ok = size > machine / 2 and run["status"] == "ok" and run["rss_gib"] * 2**30 < size
    print(f"\ncheckpoint larger than half the machine's memory: {size > machine / 2}; "
          f"profiled with disk offload, peak RSS {run['rss_gib']:.2f} GiB below the checkpoint's "
          f"{size / 2**30:.1f} GiB: {run['rss_gib'] * 2**30 < size}")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", metavar="DIR", help="where to write (and reuse) the weights")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run the range pass of the precisionaudit package in DIR, interleaved")
    parser.add_argument("--offload", action="store_true",
                        help="instead: profile a checkpoint larger than half the machine's memory")
    parser.add_argument("--small", action="store_true",
                        help="instead: the ratio on GPT-2 small")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    if args.offload:
        return offload_bench(args.keep)
    if args.small:
        return small_bench(args.repeat, args.baseline)
    directory = args.keep or tempfile.mkdtemp(prefix="range_bench-")
    weights = os.path.join(directory, "gpt_1b.safetensors")
    if not os.path.exists(weights):
        started = time.perf_counter()
        params = run_child("write", weights)["params"]
        print(f"wrote {params / 1e9:.2f} B parameters to {weights} in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
    kinds = {"plain": ("plain", None), "range": ("range", None)}
    if args.baseline:
        kinds["baseline"] = ("range", args.baseline)
    runs = {kind: [] for kind in kinds}
    for _ in range(args.repeat):
        for kind, (what, package) in kinds.items():  # interleaved: the machine's load hits all alike
            runs[kind].append(run_child(what, weights, package))
    try:
        if not args.keep:
            os.remove(weights)
            os.rmdir(directory)
    except OSError:
        pass

    def median(kind, key):
        return statistics.median(r[key] for r in runs[kind])

    model_gib = runs["plain"][0]["model_bytes"] / 2**30
    rss_limit = model_gib + RSS_OVER_MODEL_GIB
    print(f"| 1.3 B model, fp32 weights {model_gib:.2f} GiB, 8 batches x 128 tokens "
          f"(median of {args.repeat}) | load (s) | run (s) | CPU (s) | peak RSS (GiB) | / plain | CPU / plain |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    labels = {"plain": "8 plain fp32 forwards", "range": "range pass over the 8 batches",
              "baseline": f"range pass, {args.baseline}"}
    for kind in kinds:
        print(f"| {labels[kind]} | {median(kind, 'load_s'):.1f} | {median(kind, 'run_s'):.1f} | "
              f"{median(kind, 'cpu_s'):.1f} | {median(kind, 'rss_gib'):.2f} | "
              f"{median(kind, 'run_s') / median('plain', 'run_s'):.2f}x | "
              f"{median(kind, 'cpu_s') / median('plain', 'cpu_s'):.2f}x |")
    ratio = median("range", "run_s") / median("plain", "run_s")
    last = runs["range"][-1]
    print(f"\nrange pass / plain forwards: {ratio:.2f}x (target <= {TIME_RATIO_TARGET:.0f}x); "
          f"range peak RSS {median('range', 'rss_gib'):.2f} GiB (target <= model + 1 GiB = "
          f"{rss_limit:.2f}); {last['ops']} ops measured, runs under the target on "
          f"{last['low_runs']} of {last['batches']} batches, fp32 reference on {last['reference_runs']}")
    ok = ratio <= TIME_RATIO_TARGET and median("range", "rss_gib") <= rss_limit
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
