"""What precisionaudit says about CUDA, measured on a real GPU (issues 28 and 38).

Everything precisionaudit says about CUDA is emulated on CPU. This script runs the same things
on a GPU and prints nine tables (markdown, ready for bench/README.md), then runs the GPU-only
tests (tests/test_gpu.py). In the order they run (issue 38's measures first):

7. watch     - ``precisionaudit.watch`` in a GPT-2-small training loop (8x512; fp16 AMP +
               GradScaler, then bf16): plain, watched at the default ``every``, at ``every=1``,
               side by side; one forced trigger, its replay's cost in steps (targets: 1.01 x
               plain, 15 steps); the forward-overflow and masked-log demonstrations
               (tests/watch_loops.py) on CPU and on the device: the same module, op and phase?
4. step time - GPT-2-small training steps (CUDA events, medians): AMP and AMP + plan side by
               side (issue 36's target, plan at most 1.03 x AMP), eager and SDPA, then fp32,
               fp32+TF32, bf16; each variant's forward GEMM FLOPs in fp16 and the plan's entries
8. cumsum    - fp16/bf16 ``cumsum`` (pa103_cumsum_hazard, transformers' position ids) on the
               device and emulated (low_accumulation.py), each against fp64
9. real FP8  - torchao's ``convert_to_float8_training`` against check --dtype float8's emulation
               per recipe (the outlier demonstration, GPT-2 small with nn.Linear), and the step
               time of bf16, FP8 and FP8 with the plan's filter (capability 8.9+, torchao needed)
1. dtypes    - per model, the aten ops under real ``torch.autocast("cuda")`` against the scan's
               own record (its capture, emulated on CPU), compared per module as multisets of
               (aten op, input dtypes, output dtypes); the target is 0 mismatches
2. numerics  - ``check --device cuda`` against ``check --device cpu-emulated`` on the check
               demonstrations (sample_models/check_*.py, tests/demos, the fp16 cumsum)
3. training  - standalone training steps under real CUDA AMP / pure fp16 / pure bf16 (issues
               23 and 24): clip before unscale, no GradScaler, Adam eps in fp16, bf16 AdamW
               stalls; each also run on CPU with CUDA's autocast emulated, side by side
5. GEMM time - the shapes the shape rules flag against their padded sizes, and FP8

On the device (repo root; the missing packages travel as wheels in .whl/, torchao's too)::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD && \\
        PYTHONUNBUFFERED=1 python3 bench/gpu_truth.py --json $OUT/results.json

Results go to $OUT (else --out, else /tmp/gpu_truth): gpu_truth.json, gpu_truth.md and
gpu_truth.log (and --json FILE), rewritten as each result arrives, so a run cut short keeps
what it measured. Each section has its own time budget (420 s in all) and its own try/except;
a watchdog ends the run at --budget seconds (default 460: the run fits 8 minutes of GPU time)
whatever happens. ``--dry-run`` runs every code path on CPU at tiny sizes (CUDA replaced by
CPU with CUDA's policy emulated, or skipped with a note); tests/test_gpu.py runs it.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import _thread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

SAMPLES = os.path.join(ROOT, "sample_models")
HF_MODELS = os.path.join(ROOT, "tests", "hf_models")
DEMOS = os.path.join(ROOT, "tests", "demos")
#: (file, entries) of the real architectures, built from small transformers configs
ARCHITECTURES = [
    (os.path.join(HF_MODELS, "gpt2_tiny.py"), ["get_model", "get_eager_model", "get_upcast_model"]),
    (os.path.join(HF_MODELS, "llama_tiny.py"), ["get_model", "get_eager_model"]),
    (os.path.join(HF_MODELS, "t5_tiny.py"), ["get_model", "get_eager_model"]),
    (os.path.join(HF_MODELS, "bert_tiny.py"), ["get_model", "get_eager_model"]),
    (os.path.join(ROOT, "bench", "models", "vit_tiny.py"), ["get_model", "get_eager_model"]),
]


# --------------------------------------------------------------------------------------
# results: written as they arrive
# --------------------------------------------------------------------------------------
class Results:
    """The JSON document and the markdown tables, rewritten on every ``save``."""

    def __init__(self, out_dir: str, json_path: str | None = None):
        os.makedirs(out_dir, exist_ok=True)
        self.out_dir, self.json_path = out_dir, json_path
        self.data: dict = {"environment": {}, "sections": {}}
        self.tables: dict[str, list[str]] = {}
        self.lock = threading.Lock()
        self._log = open(os.path.join(out_dir, "gpu_truth.log"), "a", buffering=1)

    def log(self, message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        print(line, flush=True)
        self._log.write(line + "\n")

    def section(self, name: str) -> dict:
        return self.data["sections"].setdefault(name, {"status": "running", "rows": [], "notes": []})

    def table(self, name: str, lines: list[str]) -> None:
        self.tables[name] = lines

    def save(self) -> None:
        with self.lock:
            document = json.dumps(self.data, indent=1, default=str)
            files = [(os.path.join(self.out_dir, "gpu_truth.json"), document),
                     (os.path.join(self.out_dir, "gpu_truth.md"), self.markdown())]
            for path, text in files + ([(self.json_path, document)] if self.json_path else []):
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)

    def markdown(self) -> str:
        env = self.data["environment"]
        lines = ["# GPU truth (bench/gpu_truth.py)", ""]
        lines += [f"- {k}: {v}" for k, v in env.items()]
        for name, section in self.data["sections"].items():
            lines += ["", f"## {name}", "", f"status: {section['status']}"
                      + (f" ({section['wall_s']} s)" if "wall_s" in section else ""), ""]
            lines += self.tables.get(name, [])
            lines += [f"- note: {n}" for n in section["notes"]]
        return "\n".join(lines) + "\n"


def md_table(header: list[str], rows: list[list]) -> list[str]:
    def cell(v):
        if isinstance(v, float):
            v = f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


class Budget:
    """A section's time budget: ``left()`` is checked between items; past budget + grace the
    watchdog interrupts the main thread (KeyboardInterrupt), which the section catches."""

    def __init__(self, seconds: float):
        self.seconds, self.start = seconds, time.monotonic()

    def used(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.seconds - self.used()


def reached(section: dict, budget: Budget, what: str) -> bool:
    """Whether ``budget`` leaves time for ``what``; where it does not, the section's notes say so."""
    if budget.left() >= 0:
        return True
    section["notes"].append(f"not reached within the budget: {what}")
    return False


def failure(exc: BaseException, first_line: bool = False) -> str:
    """An exception as a short result: its type and message (``first_line``: its first line)."""
    text = str(exc).splitlines()[0] if first_line and str(exc) else str(exc)
    return f"{type(exc).__name__}: {text}"[:300]


def attempt(fn, *args, **fields) -> dict:
    """``fn(*args)``'s row, or ``fields`` with the error it raised: one item's failure is its result."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001
        return {**fields, "error": failure(exc)}


class Watchdog(threading.Thread):
    """Ends a stuck section (interrupt_main) and the whole run at its deadline (os._exit)."""

    def __init__(self, results: Results, total_s: float, grace_s: float = 30.0):
        super().__init__(daemon=True)
        self.results, self.deadline, self.grace = results, time.monotonic() + total_s, grace_s
        self.budget: Budget | None = None
        self.interrupted = False

    def run(self):
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            if now > self.deadline:
                self.results.data["environment"]["cut"] = "the run reached its --budget and was ended"
                self.results.log("watchdog: total budget reached, saving and exiting")
                try:
                    self.results.save()
                finally:
                    os._exit(3)
            budget = self.budget
            if budget is not None and budget.left() < -self.grace and not self.interrupted:
                self.interrupted = True
                self.results.log("watchdog: section over its budget, interrupting it")
                _thread.interrupt_main()


def run_section(ctx, name: str, budget_s: float, fn) -> None:
    """Run one table's function under its budget; whatever it raises is recorded, not fatal."""
    results = ctx.results
    section = results.section(name)
    budget = Budget(budget_s)
    ctx.watchdog.budget, ctx.watchdog.interrupted = budget, False
    results.log(f"== {name} (budget {budget_s:.0f} s)")
    try:
        fn(ctx, section, budget)
        section["status"] = "done" if section["status"] == "running" else section["status"]
    except KeyboardInterrupt:
        section["status"] = "cut by the watchdog (over budget)"
    except BaseException as exc:  # noqa: BLE001 - one section's failure must not end the run
        section["status"] = f"failed: {type(exc).__name__}: {exc}"
        section["traceback"] = traceback.format_exc()
        results.log(section["traceback"])
    finally:
        ctx.watchdog.budget = None
        section["wall_s"] = round(budget.used(), 1)
        results.log(f"== {name}: {section['status']} ({section['wall_s']} s)")
        results.save()


class Context:
    def __init__(self, args, results, watchdog):
        self.args, self.results, self.watchdog = args, results, watchdog
        self.dry = args.dry_run
        self.cuda = torch.cuda.is_available() and not args.dry_run
        self.dev = "cuda" if self.cuda else "cpu"
        self.tmp = tempfile.mkdtemp(prefix="gpu_truth_")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def environment(ctx) -> dict:
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
           "pinned torch (constraints.txt)": _pinned_torch(),
           "dry_run": ctx.dry, "device": "cpu (dry run)" if not ctx.cuda else torch.cuda.get_device_name(0)}
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        env.update(sm_count=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}")
    try:
        env["precisionaudit_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                                      capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001 - no git there: the commit is simply unknown
        env["precisionaudit_commit"] = "unknown"
    return env


def _pinned_torch() -> str:
    try:
        with open(os.path.join(ROOT, "constraints.txt")) as f:
            return next((line.strip() for line in f if line.lower().startswith("torch==")), "?")
    except OSError:
        return "?"


# --------------------------------------------------------------------------------------
# 1. dtypes: real CUDA autocast against the scan's emulated record
# --------------------------------------------------------------------------------------
#: calls whose aten ops are the backend's choice (SDPA: flash / efficient / cuDNN / CPU flash /
#: math; recurrent layers: cuDNN's one _cudnn_rnn against CPU's mkldnn_rnn_layer per layer):
#: compared as one op, the dtypes of the tensors it reads from outside -> its result's dtype
OPAQUE_CALLS = ("scaled_dot_product", "lstm", "gru", "rnn_tanh", "rnn_relu")
OPAQUE_ATENS = ("rnn", "scaled_dot_product")
CAST = "aten._to_copy.default"


def op_keys(rec) -> collections.Counter:
    """Counter of (module, aten op, input dtypes, output dtypes) over a Recorder's ops.

    Inputs are the tensor arguments in order (Python scalars left out); an attention call
    (SDPA) is one key: its casts as they are, then ("sdpa", dtypes of the tensors it read
    from outside the call, dtype of its result), since which kernel runs it is the backend's.
    """
    keys = collections.Counter()
    for call in rec.calls:
        ops = [rec.ops[i] for i in call.ops]
        if any(tag in call.fn for tag in OPAQUE_CALLS) or any(tag in op.target for op in ops for tag in OPAQUE_ATENS):
            inside = set(call.ops)
            rest = [op for op in ops if op.target != CAST]
            for op in ops:
                if op.target == CAST:
                    keys[_key(call, op)] += 1
            if rest:
                external = tuple(sorted({str(r.dtype) for op in rest for r in op.inputs
                                         if r.dtype is not None and r.dtype.is_floating_point
                                         and not (isinstance(r.producer, int) and r.producer in inside)}))
                keys[(call.module, f"one op: {call.fn}", external,
                      tuple(str(o.dtype) for o in rest[-1].outputs[:1]))] += 1
            continue
        for op in ops:
            keys[_key(call, op)] += 1
    return keys


def call_keys(rec) -> collections.Counter:
    """Counter of (module, call, floating dtypes it read from outside, floating dtypes its ops
    computed in, the dtype of its last op's first floating output: the call's result; SDPA's
    log-sum-exp, cuDNN's weight buffer are the backend's) over a Recorder's user-level calls: the same
    comparison one level up, where backend-specific aten names (cuDNN's batch norm, CPU's
    mkldnn kernels) do not count."""
    keys = collections.Counter()
    for call in rec.calls:
        ops = [rec.ops[i] for i in call.ops]
        if not ops:
            continue
        inside = set(call.ops)
        external = {str(r.dtype) for op in ops for r in op.inputs if _floating(r)
                    and not (isinstance(r.producer, int) and r.producer in inside)}
        computed = {str(r.dtype) for op in ops if op.target != CAST for r in op.inputs if _floating(r)}
        result = next((str(o.dtype) for o in ops[-1].outputs if _floating(o)), None)
        keys[(call.module, call.fn, tuple(sorted(external)), tuple(sorted(computed)),
              (result,) if result else ())] += 1
    return keys


def _floating(ref) -> bool:
    """A floating tensor (the masks and indices an op reads are not the autocast policy's)."""
    return ref.dtype is not None and ref.dtype.is_floating_point


def is_float_key(key) -> bool:
    """A key whose op reads or writes a floating tensor: what the autocast policy decides."""
    return any("float" in d for part in key[2:] if isinstance(part, (tuple, list)) for d in part)


def _key(call, op) -> tuple:
    return (call.module, op.target, tuple(str(r.dtype) for r in op.inputs if r.dtype is not None),
            tuple(str(r.dtype) for r in op.outputs))


def emulated_record(path: str, entry: str, dtype: str):
    """The scan's own record of the model: precisionaudit's capture (fake tensors, CUDA's
    autocast emulated on CPU; the eager fallback where the scan takes it), its Recorder kept."""
    from precisionaudit.capture.pytorch import capture as capture_module
    from precisionaudit.core.target import Target
    from precisionaudit.runtime.sources import LoadOptions

    kept = []
    original = capture_module.Recorder

    class Keeping(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            kept.append(self)

    capture_module.Recorder = Keeping
    try:
        result = capture_module.capture_file(path, Target(dtype, "autocast", "cuda"), LoadOptions(entry))
    finally:
        capture_module.Recorder = original
    return kept[-1], result.frontend


def real_record(path: str, entry: str, dtype: str, device: str):
    """The same Recorder around the model's real forward on ``device`` under the real
    ``torch.autocast`` (device "cpu": CUDA's policy emulated on real CPU tensors, the dry run)."""
    from precisionaudit.runtime.pytorch.model_file import split_inputs
    from precisionaudit.runtime.pytorch.source import open_source
    from precisionaudit.runtime.sources import LoadOptions
    from precisionaudit.capture.pytorch.recorder import Recorder
    from precisionaudit.core.target import Target
    from precisionaudit.runtime.pytorch.cuda_autocast import autocast_policy
    from precisionaudit.runtime.pytorch.execution import to_device

    source = open_source(path, LoadOptions(entry))
    make_model, make_inputs = source.make_model, source.make_inputs
    torch.manual_seed(0)
    model = make_model().to(device)  # in the mode get_model() gives it, as the scan captures it
    args, kwargs = to_device(split_inputs(make_inputs(), path, "get_example_inputs"), device)
    target = Target(dtype, "autocast", "cuda")
    policy = contextlib.ExitStack()
    if device == "cuda":
        policy.enter_context(torch.autocast("cuda", dtype=target.torch_dtype))
    else:  # the dry run: CUDA's policy and kernels emulated on real CPU tensors (the scan's eager path)
        from precisionaudit.runtime.pytorch.emulation import EmulatedKernels

        policy.enter_context(EmulatedKernels())
        policy.enter_context(autocast_policy(target, "cpu-emulated"))
    recorder = Recorder(model, {**dict(model.named_buffers()), **dict(model.named_parameters())})
    recorder.mark_inputs((args, kwargs))
    with torch.no_grad(), policy, recorder:
        model(*args, **kwargs)
    return recorder


def compare_dtypes(path: str, entry: str, dtype: str, device: str) -> dict:
    """One model's row: ops on each side, matched, and the mismatches (either side's surplus)."""
    emulated, frontend = emulated_record(path, entry, dtype)
    row = {"model": os.path.relpath(path, ROOT), "entry": entry, "dtype": dtype, "frontend": frontend}
    try:
        real = real_record(path, entry, dtype, device)
    except Exception as exc:  # noqa: BLE001 - a forward CUDA refuses is a result
        row.update(status="real run raised", error=f"{type(exc).__name__}: {str(exc)[:300]}",
                   mismatches=None)
        return row
    a, b = op_keys(real), op_keys(emulated)
    only_real, only_emulated = a - b, b - a
    dtype_pairs, one_side_float, one_side_other = pair_differences(only_real, only_emulated)
    ca, cb = call_keys(real), call_keys(emulated)
    call_pairs, _, _ = pair_differences(ca - cb, cb - ca)
    row.update(status="ok", ops_real=sum(a.values()), ops_emulated=sum(b.values()),
               matched=sum((a & b).values()), mismatches=dtype_pairs,
               one_side_float=one_side_float, one_side_other=one_side_other,
               calls=sum(ca.values()), call_mismatches=call_pairs,
               calls_only_real=_listed(ca - cb, 12), calls_only_emulated=_listed(cb - ca, 12),
               only_real=_listed(only_real), only_emulated=_listed(only_emulated))
    return row


def pair_differences(only_real: collections.Counter, only_emulated: collections.Counter) -> tuple[int, int, int]:
    """(dtype mismatches, float ops on one side only, int/bool ops on one side only).

    Per (module, aten op), the surplus keys of the two sides are paired: a pair is the same op
    in the same module with other dtypes on each side (a policy mismatch); what is left
    unpaired is an op that ran on one side only (a different path, e.g. a mask HF drops after
    an ``.item()`` check that fake tensors cannot answer)."""
    groups: dict = collections.defaultdict(lambda: [collections.Counter(), collections.Counter()])
    for side, keys in enumerate((only_real, only_emulated)):
        for key, n in keys.items():
            groups[key[:2]][side][key] += n
    pairs = one_float = one_other = 0
    for real, emulated in groups.values():
        paired = min(sum(real.values()), sum(emulated.values()))
        pairs += paired
        rest = real if sum(real.values()) > paired else emulated
        left = sum(rest.values()) - paired
        if left:
            floats = any(is_float_key(k) for k in rest)
            one_float += left if floats else 0
            one_other += 0 if floats else left
    return pairs, one_float, one_other


def _listed(keys: collections.Counter, limit: int = 40) -> list:
    """[module, op, in dtypes, out dtypes, count], floating ones first."""
    ordered = sorted(keys.items(), key=lambda kv: (not is_float_key(kv[0]), str(kv)))
    return [list(k) + [n] for k, n in ordered[:limit]]


def dtype_models(dry: bool, all_models: bool = False) -> list[tuple[str, str]]:
    """(file, entry): the architectures first, then every sample model with example inputs."""
    models = [(path, entry) for path, entries in ARCHITECTURES for entry in entries]
    samples = sorted(f for f in os.listdir(SAMPLES) if f.endswith(".py"))
    for name in samples:
        with open(os.path.join(SAMPLES, name)) as f:
            if "def get_example_inputs" in f.read():
                models.append((os.path.join(SAMPLES, name), "get_model"))
    if dry and not all_models:
        keep = {"gpt2_tiny.py:get_model", "vit_tiny.py:get_model", "check_variance.py:get_model",
                "pa101_softmax_hazard.py:get_model", "pa107_mask_hazard.py:get_model"}
        models = [(p, e) for p, e in models if f"{os.path.basename(p)}:{e}" in keep]
    return models


def table_dtypes(ctx, section, budget):
    section["notes"].append(
        "compared: per module, the multiset of (aten op, input tensor dtypes, output dtypes) the "
        "Recorder of precisionaudit's capture sees below autocast; real side: the model's real forward "
        f"({'CPU with the emulated policy: DRY RUN' if not ctx.cuda else 'CUDA'}, torch.autocast), "
        "emulated side: the scan's own capture (fake tensors, CUDA autocast emulated on CPU). "
        "SDPA and recurrent-layer calls count as one op each (their kernels are the backend's choice; "
        "keyed by the set of floating dtypes they read and their result's dtype). "
        "Per module and aten op the surplus of each side is paired: a dtype mismatch is the same op in the "
        "same module with other dtypes on each side (a policy error: target 0); an op on one side only is a "
        "different path (e.g. HF drops an all-ones mask after an .item() check that fake tensors cannot "
        "answer, so the scan's capture keeps it), split into ops with a floating tensor and int/bool-only ops. "
        "Call level: the same pairing per user-level call (module, torch function) keyed by the dtypes it "
        "read from outside, the dtypes its ops computed in and its result's, where backend-specific aten "
        "names (cuDNN batch norm, CPU mkldnn kernels) do not count")
    models = dtype_models(ctx.dry, ctx.args.all_models)
    rows = section["rows"]
    skipped = []
    architectures = {path for path, _ in ARCHITECTURES}
    dtypes = ctx.args.dtypes.split(",")
    items = [(path, entry, dtype) for first in (True, False) for dtype in dtypes
             for path, entry in models if (path in architectures) == first]  # architectures first
    for path, entry, dtype in items:
        if budget.left() < 0:
            skipped.append(f"{os.path.basename(path)}:{entry}:{dtype}")
            continue
        started = time.monotonic()
        try:
            row = compare_dtypes(path, entry, dtype, ctx.dev)
        except Exception as exc:  # noqa: BLE001
            row = {"model": os.path.relpath(path, ROOT), "entry": entry, "dtype": dtype,
                   "status": f"failed: {type(exc).__name__}: {str(exc)[:300]}", "mismatches": None}
        row["wall_s"] = round(time.monotonic() - started, 2)
        rows.append(row)
        ctx.results.log(f"dtypes {row['model']}:{entry} {dtype}: {row['status']} "
                        f"mismatches={row.get('mismatches')}")
        _dtypes_table(ctx, section)
    if skipped:
        section["notes"].append(f"not reached within the budget: {len(skipped)}: {', '.join(skipped)}")
    _dtypes_table(ctx, section)


def _dtypes_table(ctx, section):
    rows = section["rows"]
    body = [[f"{r['model']}:{r['entry']}", r["dtype"], r.get("frontend", ""), r["status"],
             r.get("ops_real", ""), r.get("ops_emulated", ""), r.get("matched", ""),
             "" if r.get("mismatches") is None else r["mismatches"], r.get("one_side_float", ""),
             r.get("one_side_other", ""), r.get("call_mismatches", ""), r.get("error", "")[:120]] for r in rows]
    lines = md_table(["model", "dtype", "scan frontend", "status", "ops real", "ops emulated",
                      "matched", "dtype mismatches", "float ops on one side only",
                      "int/bool ops on one side only", "call-level dtype mismatches", "error"], body)
    total = sum(r["mismatches"] or 0 for r in rows)
    calls = sum(r.get("call_mismatches") or 0 for r in rows)
    lines += ["", f"total call-level dtype mismatches: {calls}"]
    lines += ["", f"total dtype mismatches: {total} over {sum(1 for r in rows if r['status'] == 'ok')} "
              f"compared models (target 0)"]
    detail = [r for r in rows if r.get("mismatches") or r.get("one_side_float") or r.get("one_side_other")
              or r.get("call_mismatches")]
    if detail:
        lines += ["", "mismatches (module, aten op, in dtypes, out dtypes, count):"]
        for r in detail:
            lines.append(f"- {r['model']}:{r['entry']} {r['dtype']}")
            if r.get("call_mismatches"):
                lines += [f"  - call, real only: {k}" for k in r["calls_only_real"]]
                lines += [f"  - call, emulated only: {k}" for k in r["calls_only_emulated"]]
            for side in ("only_real", "only_emulated"):
                keys = sorted(r[side], key=lambda k: not is_float_key(k))  # float ones first
                lines += [f"  - {side.replace('_', ' ')}: {k}" for k in keys[:12]]
    ctx.results.table("1. dtypes", lines)
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 2. numerics: check --device cuda against --device cpu-emulated
# --------------------------------------------------------------------------------------
CROSS_ENTROPY_MODEL = '''"""cross_entropy on the logits of an fp16 GEMM under autocast (generated by bench/gpu_truth.py)."""
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 10)

    def forward(self, x, y):
        return F.cross_entropy(self.proj(x), y)


def get_model():
    return Classifier()


def get_example_inputs():
    return (torch.randn(8, 64), torch.randint(0, 10, (8,)))
'''


def numerics_demos(tmp: str) -> list[tuple[str, str, str, str]]:
    """(file, dtype, mode, why[, extra flags]) of the check demonstrations in tests."""
    demos = [(os.path.join(SAMPLES, "check_mask_fill.py"), "float16", "autocast", "tests/test_check.py"),
             (os.path.join(SAMPLES, "check_exp_overflow.py"), "float16", "pure", "tests/test_check.py"),
             (os.path.join(SAMPLES, "check_variance.py"), "float16", "autocast", "tests/test_check.py"),
             (os.path.join(SAMPLES, "check_clean.py"), "float16", "autocast", "tests/test_check.py")]
    for name, dtype, mode in [("exp_gates.py", "float16", "pure"), ("mask_fill.py", "float16", "autocast"),
                              ("mask_fill.py", "float16", "pure"), ("rotary_positions.py", "float16", "pure"),
                              ("rotary_positions.py", "float16", "autocast"),
                              ("rotary_positions.py", "bfloat16", "pure"),
                              ("rotary_positions.py", "bfloat16", "autocast"),
                              ("positions_cumsum.py", "bfloat16", "pure"), ("t5_ff.py", "float16", "pure"),
                              ("layernorm_eps.py", "float16", "pure")]:
        demos.append((os.path.join(DEMOS, name), dtype, mode, "tests/test_demos.py"))
    demos.append((os.path.join(SAMPLES, "pa103_cumsum_hazard.py"), "float16", "pure",
                  "CUDA's fp16 cumsum accumulates in fp16 (emulated: low_accumulation.py)"))
    demos.append((os.path.join(DEMOS, "positions_cumsum.py"), "float16", "pure",
                  "cumsum positions in fp16 (the same scan, on a demo)"))
    ce = os.path.join(tmp, "cross_entropy_grad.py")
    with open(ce, "w") as f:
        f.write(CROSS_ENTROPY_MODEL)
    demos.append((ce, "float16", "autocast", "check --grad: the emulation raised in log_softmax's backward "
                  "on CPU before issue 36 (expected scalar type Float but found Half)", ["--grad"]))
    return demos


def cli(*args) -> tuple[int, str, str]:
    """precisionaudit's command line, in this process (torch is imported: it does not fork)."""
    from click.testing import CliRunner

    from precisionaudit.cli import main

    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart already
        runner = CliRunner()
    result = runner.invoke(main, [str(a) for a in args])
    stderr = getattr(result, "stderr", "") if result.stderr_bytes is not None else ""
    return result.exit_code, result.stdout, stderr


def _summary(report: dict, variant: str) -> dict:
    entry = next((v for v in report.get("variants", []) if v["name"] == variant), None)
    if entry is None:
        return {"status": "absent"}
    out = {"status": entry["status"], "error": (entry.get("error") or "")[:160]}
    outputs = [o for o in entry.get("outputs", []) if o.get("status") != "incomparable"]
    if outputs:
        first = outputs[0]
        out.update({k: first.get(k) for k in ("max_abs", "max_rel", "mean_rel", "cosine", "nonfinite")})
    fd = entry.get("first_divergence")
    if fd:
        out["first_divergence"] = f"{fd.get('module')}:{fd.get('op')}"
    return out


def table_numerics(ctx, section, budget):
    section["notes"].append(
        "each demonstration: `precisionaudit plan` (static plan), then `precisionaudit check --plan` "
        "with --device cuda and with --device cpu-emulated (same seed, same inputs); agreement = "
        "the same status for baseline and for planned. Metrics are of the first compared output."
        + (" DRY RUN: both sides ran on CPU (cuda falls back to the emulation)." if not ctx.cuda else ""))
    rows = section["rows"]
    demos = numerics_demos(ctx.tmp)
    if ctx.dry and not ctx.args.all_models:  # one demonstration of each kind: autocast, pure, --grad
        keep = {"check_mask_fill.py", "check_exp_overflow.py", "pa103_cumsum_hazard.py", "cross_entropy_grad.py"}
        demos = [d for d in demos if os.path.basename(d[0]) in keep]
    for path, dtype, mode, why, *extra in demos:
        if budget.left() < 0:
            section["notes"].append(f"not reached within the budget: {os.path.basename(path)} {dtype} {mode}")
            continue
        row = {"demo": os.path.relpath(path, ROOT) if path.startswith(ROOT) else os.path.basename(path),
               "dtype": dtype, "mode": mode, "why": why, "flags": extra[0] if extra else []}
        started = time.monotonic()
        try:
            plan = os.path.join(ctx.tmp, f"plan_{len(rows)}.yaml")
            flags = ["--dtype", dtype, "--mode", mode, "--timeout", "120"]
            code, _, err = cli("plan", path, *flags, "-o", plan)
            flags += extra[0] if extra else []
            row["plan_exit"] = code
            if code != 0:
                row["plan_error"] = err.strip()[-300:]
            plan_args = ["--plan", plan] if code == 0 else []
            for device in ("cuda", "cpu-emulated"):
                code, out, err = cli("check", path, *flags, *plan_args, "--device", device, "--format", "json")
                try:
                    report = json.loads(out)
                except ValueError:
                    row[device] = {"exit": code, "error": (err or out).strip()[-300:]}
                    continue
                row[device] = {"exit": code, "ran_on": report.get("device"),
                               "baseline": _summary(report, "baseline"), "planned": _summary(report, "planned"),
                               "notes": report.get("notes", [])}
            a, b = row.get("cuda", {}), row.get("cpu-emulated", {})
            row["agree"] = all(a.get(v, {}).get("status") == b.get(v, {}).get("status") is not None
                               for v in ("baseline", "planned")) and "baseline" in a
        except Exception as exc:  # noqa: BLE001
            row["failed"] = f"{type(exc).__name__}: {exc}"
        row["wall_s"] = round(time.monotonic() - started, 2)
        rows.append(row)
        ctx.results.log(f"numerics {row['demo']} {dtype} {mode}: agree={row.get('agree')} "
                        f"{row.get('failed', '')}")
        _numerics_table(ctx, section)
    _numerics_table(ctx, section)


def _fmt_variant(v: dict) -> str:
    if not v:
        return "-"
    if "status" not in v:
        return str(v)
    parts = [v["status"]]
    if v.get("max_abs") is not None:
        parts.append(f"max_abs {v['max_abs']:.3g}, cos {v['cosine']:.6f}" if isinstance(v.get("cosine"), float)
                     else f"max_abs {v['max_abs']}")
    if v.get("error"):
        parts.append(v["error"][:80])
    return "; ".join(parts)


def _numerics_table(ctx, section):
    body = []
    for r in section["rows"]:
        a, b = r.get("cuda", {}), r.get("cpu-emulated", {})
        body.append([" ".join([r["demo"], *r.get("flags", [])]), f"{r['dtype']} {r['mode']}", _fmt_variant(a.get("baseline", {})),
                     _fmt_variant(b.get("baseline", {})), _fmt_variant(a.get("planned", {})),
                     _fmt_variant(b.get("planned", {})), r.get("agree", r.get("failed", "?")),
                     a.get("ran_on", "")])
    lines = md_table(["demonstration", "target", "baseline cuda", "baseline emulated", "planned cuda",
                      "planned emulated", "agree", "cuda side ran on"], body)
    ctx.results.table("2. numerics", lines)
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 3. training steps (issues 23 and 24)
# --------------------------------------------------------------------------------------
class Side:
    """Where a training program runs: real CUDA AMP, or CPU with CUDA's autocast emulated."""

    def __init__(self, name: str):
        from precisionaudit.runtime.pytorch import execution

        self.name = name
        self.device = "cuda" if name == "cuda" else "cpu"
        self.runtime = execution.resolve("cuda" if name == "cuda" else "cpu-emulated")

    def autocast(self, dtype):
        """The forward's context for fp16/bf16 autocast (the backward runs outside it, as in
        PyTorch's AMP examples): torch.autocast("cuda"), or its emulation on CPU."""
        from precisionaudit.core.target import Target
        from precisionaudit.runtime.pytorch import execution

        return execution.policy(self.runtime, Target(str(dtype).split(".")[-1], "autocast", "cuda"))

    def numerics(self):
        """Around the whole step: on CPU, low-precision kernels computed as CUDA's are."""
        from precisionaudit.runtime.pytorch import execution

        return execution.numerics(self.runtime)

    def scaler(self, **kwargs):
        return torch.amp.GradScaler(self.device, **kwargs)


def _mlp(side, widths, seed=0):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(torch.nn.GELU())
    return torch.nn.Sequential(*layers).to(side.device)


def train_clip_before_unscale(side, steps: int) -> dict:
    """PA401: clip_grad_norm_ on the scaled gradients vs after scaler.unscale_ (same init)."""
    out = {}
    torch.manual_seed(1)
    x = torch.randn(256, 64, device=side.device)
    y = torch.randint(0, 10, (256,), device=side.device)
    for protocol in ("clip before unscale_", "unscale_ then clip", "fp32, clip"):
        model = _mlp(side, [64, 256, 256, 10])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = side.scaler(init_scale=2.0 ** 16, enabled=protocol != "fp32, clip")
        losses, first = [], {}
        for step in range(steps):
            opt.zero_grad(set_to_none=True)
            amp = side.autocast(torch.float16) if protocol != "fp32, clip" else contextlib.nullcontext()
            with side.numerics():
                with amp:
                    # .float(): the CPU emulation's log_softmax backward refuses fp16 (see the report)
                    loss = torch.nn.functional.cross_entropy(model(x).float(), y)
                scaler.scale(loss).backward()
            if protocol == "unscale_ then clip":
                scaler.unscale_(opt)
            scale = scaler.get_scale() if scaler.is_enabled() else 1.0
            true_norm = torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(p.grad.float()) for p in model.parameters()])).item()
            if protocol == "clip before unscale_":
                true_norm /= scale
            seen = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item()
            if step == 0:
                first = {"scale": scale, "norm_seen_by_clip": seen, "true_grad_norm": true_norm,
                         "clip_applied": seen > 1.0, "clip_coefficient": min(1.0, 1.0 / (seen + 1e-6))}
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        out[protocol] = {**first, "loss_first": losses[0], "loss_last": losses[-1],
                         "loss_curve": [round(v, 5) for v in losses]}
    bad, good = out["clip before unscale_"], out["unscale_ then clip"]
    out["verdict"] = ("hazard: the clip saw the scaled norm" if bad["norm_seen_by_clip"] > 100 * good["norm_seen_by_clip"]
                      else "no difference")
    return out


def train_no_scaler(side, steps: int) -> dict:
    """PA403/PA306: fp16 autocast with no GradScaler - gradients flushed to zero against fp32.

    A student fits a teacher's 4096 outputs (MSE over 512 x 4096 elements), its loss divided by
    8 for gradient accumulation over 8 micro-batches (one is run): the fp16 gradient of each
    output element is about 2 * residual / (2M * 8), below fp16's subnormal range."""
    accumulation = 8
    torch.manual_seed(2)
    x = torch.randn(512, 256, device=side.device)
    teacher = _mlp(side, [256, 512, 512, 4096], seed=7)
    with torch.no_grad():
        target = teacher(x)
    out = {}
    grads = {}
    for variant in ("fp32", "fp16 autocast, no scaler", "fp16 autocast + GradScaler"):
        model = _mlp(side, [256, 512, 512, 4096], seed=3)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = side.scaler(enabled=variant.endswith("GradScaler"))
        losses, skipped = [], 0
        for step in range(steps):
            opt.zero_grad(set_to_none=True)
            amp = side.autocast(torch.float16) if variant != "fp32" else contextlib.nullcontext()
            with side.numerics():
                with amp:
                    loss = torch.nn.functional.mse_loss(model(x).float(), target) / accumulation
                scaler.scale(loss).backward()
            if step == 0:
                scaler.unscale_(opt) if scaler.is_enabled() else None
                grads[variant] = torch.cat([p.grad.detach().float().flatten() for p in model.parameters()])
            scale_before = scaler.get_scale() if scaler.is_enabled() else 1.0
            scaler.step(opt)
            scaler.update()
            if scaler.is_enabled() and scaler.get_scale() < scale_before:
                skipped += 1
            losses.append(loss.item())
        out[variant] = {"loss_first": losses[0], "loss_last": losses[-1], "skipped_steps": skipped,
                        "loss_curve": [round(v, 7) for v in losses]}
    ref = grads["fp32"]
    nonzero = ref != 0
    for variant in ("fp16 autocast, no scaler", "fp16 autocast + GradScaler"):
        g = grads[variant]
        out[variant]["grads_flushed_share"] = ((g == 0) & nonzero).sum().item() / max(1, nonzero.sum().item())
        out[variant]["grad_rel_error"] = ((g - ref).norm() / ref.norm()).item()
    out["median_abs_grad_fp32"] = ref.abs().median().item()
    out["verdict"] = ("hazard: gradients flush without a scaler"
                      if out["fp16 autocast, no scaler"]["grads_flushed_share"] > 0.01 else "no flush measured")
    return out


def train_adam_eps(side, steps: int) -> dict:
    """PA406: a pure fp16 model with Adam(eps=1e-8) - eps is 0 in fp16 and a zero gradient is 0/0."""
    out = {}
    variants = [("fp16, eps=1e-8", torch.float16, 1e-8, {}), ("fp16, eps=1e-4", torch.float16, 1e-4, {}),
                ("fp32, eps=1e-8", torch.float32, 1e-8, {})]
    if side.device == "cuda":
        variants.append(("fp16, eps=1e-8, fused=True", torch.float16, 1e-8, {"fused": True}))
    torch.manual_seed(4)
    ids = torch.randint(0, 100, (64, 16), device=side.device)  # rows 100..999 are never read
    labels = torch.randint(0, 10, (64,), device=side.device)
    for name, dtype, eps, extra in variants:
        torch.manual_seed(5)
        model = torch.nn.Sequential(torch.nn.Embedding(1000, 32), torch.nn.Flatten(),
                                    torch.nn.Linear(32 * 16, 10)).to(side.device, dtype)
        try:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=eps, **extra)
        except Exception as exc:  # noqa: BLE001 - fused may not exist for this device/dtype
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        first_nan, losses = None, []
        with side.numerics():
            for step in range(steps):
                opt.zero_grad(set_to_none=True)
                loss = torch.nn.functional.cross_entropy(model(ids).float(), labels)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if first_nan is None and any(not torch.isfinite(p).all() for p in model.parameters()):
                    first_nan = step + 1
        out[name] = {"nan_after_steps": first_nan, "loss_last": losses[-1],
                     "nan_params_share": sum((~torch.isfinite(p)).sum().item() for p in model.parameters())
                     / sum(p.numel() for p in model.parameters())}
    out["verdict"] = ("hazard: NaN with eps=1e-8 in fp16" if out["fp16, eps=1e-8"].get("nan_after_steps")
                      else "no NaN")
    return out


def train_bf16_stall(side, steps: int) -> dict:
    """PA304/PA407: pure bf16 + AdamW(lr=1e-4) - LayerNorm weights of 1.0 never move."""
    out = {}
    torch.manual_seed(6)
    x = torch.randn(128, 64, device=side.device)
    y = torch.randint(0, 10, (128,), device=side.device)
    for name, param_dtype, amp in (("pure bf16", torch.bfloat16, False),
                                   ("fp32 master weights, bf16 autocast", torch.float32, True),
                                   ("fp32", torch.float32, False)):
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64),
                                    torch.nn.Linear(64, 10)).to(side.device, param_dtype)
        norm = model[1]
        before = norm.weight.detach().clone()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            with side.numerics():
                with side.autocast(torch.bfloat16) if amp else contextlib.nullcontext():
                    loss = torch.nn.functional.cross_entropy(model(x.to(param_dtype)).float(), y)
                loss.backward()
            opt.step()
        moved = (norm.weight.detach() != before).float().mean().item()
        out[name] = {"layernorm_weights_moved_share": moved, "loss_last": loss.item(),
                     "layernorm_weight_max_change": (norm.weight.detach().float() - before.float()).abs().max().item()}
    out["verdict"] = ("hazard: bf16 norm weights stall" if out["pure bf16"]["layernorm_weights_moved_share"] < 0.05
                      <= out["fp32 master weights, bf16 autocast"]["layernorm_weights_moved_share"] else "no stall")
    return out


TRAINING = [("a. clip_grad_norm_ before scaler.unscale_ (PA401)", train_clip_before_unscale, 10),
            ("b. fp16 autocast without GradScaler (PA403, PA306)", train_no_scaler, 6),
            ("c. pure fp16 Adam eps=1e-8 (PA406, issue 24)", train_adam_eps, 10),
            ("d. pure bf16 AdamW lr 1e-4, 20 steps (PA304/PA407)", train_bf16_stall, 20)]


def table_training(ctx, section, budget):
    section["notes"].append(
        "standalone programs (check --train, issue 24, is not on main: there is no emulated *verdict* "
        "to compare with); each runs on real CUDA (torch.autocast('cuda'), torch.amp.GradScaler('cuda')) "
        "and on CPU with precisionaudit's CUDA-autocast emulation (GradScaler('cpu')); verdict = what the "
        "program shows, agreement = same verdict on both sides")
    sides = (["cuda"] if ctx.cuda else []) + ["cpu-emulated"]
    if not ctx.cuda:
        section["notes"].append("DRY RUN: no CUDA, only the cpu-emulated side ran")
    for name, fn, steps in TRAINING:
        if budget.left() < 0:
            section["notes"].append(f"not reached within the budget: {name}")
            continue
        row = {"program": name}
        for side_name in sides:
            started = time.monotonic()
            try:
                row[side_name] = fn(Side(side_name), steps if not ctx.dry else min(steps, 2))
            except Exception as exc:  # noqa: BLE001
                row[side_name] = {"verdict": f"failed: {type(exc).__name__}: {exc}"[:300]}
            row[side_name]["wall_s"] = round(time.monotonic() - started, 2)
        verdicts = [row[s]["verdict"] for s in sides]
        row["agree"] = len(set(verdicts)) == 1 if len(sides) > 1 else "n/a (one side)"
        section["rows"].append(row)
        ctx.results.log(f"training {name}: {verdicts}")
        _training_table(ctx, section, sides)


def _training_table(ctx, section, sides):
    lines = []
    for row in section["rows"]:
        lines += [f"### {row['program']}", ""]
        first = row[sides[0]]
        variants = [k for k in first if isinstance(first[k], dict)]
        measures = []
        for v in variants:
            measures += [m for m in first[v] if m not in measures and m != "loss_curve"]
        body = [[v, s, *[(row[s].get(v) or {}).get(m, "") if isinstance(row[s].get(v), dict) else "" for m in measures]]
                for v in variants for s in sides]
        lines += md_table(["variant", "ran on", *measures], body)
        lines.append("")
        for s in sides:
            lines.append(f"- {s}: " + "; ".join(f"{k} {row[s].get(k)}" for k in row[s] if not isinstance(row[s][k], dict)))
        for v in variants:
            for s in sides:
                curve = row[s].get(v, {}).get("loss_curve") if isinstance(row[s].get(v), dict) else None
                if curve:
                    lines.append(f"- loss curve, {v}, {s}: {curve}")
        lines += [f"- agreement of the verdicts: {row['agree']}", ""]
    ctx.results.table("3. training steps", lines)
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 4. step time: GPT-2-small training steps
# --------------------------------------------------------------------------------------
GPT2_MODEL_FILE = '''"""GPT-2 for bench/gpu_truth.py's step-time plan (generated)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def get_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**{config!r})).eval()


def get_example_inputs():
    return {{"input_ids": torch.randint(0, {vocab}, ({batch}, {tokens}))}}
'''


def gpt2_sizes(dry: bool) -> tuple[dict, int, int, int, int]:
    """(GPT2Config kwargs, batch, tokens, warm-up steps, timed steps): GPT-2 small at 8 x 512,
    5 + 30 steps; the dry run a two-layer model with a small vocabulary, 1 + 2 steps."""
    if dry:
        return dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1024, n_positions=128, use_cache=False), 2, 32, 1, 2
    return dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, use_cache=False), 8, 512, 5, 30


class Clock:
    """Spans timed with no host synchronisation between them: CUDA events recorded around each
    span and read after the last one (a monitor that synchronises the host shows as its cost
    instead of hiding behind the harness's own synchronisation); perf_counter on CPU."""

    def __init__(self, ctx):
        self.cuda = ctx.cuda
        self.spans: dict = collections.defaultdict(list)

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    @contextlib.contextmanager
    def span(self, key):
        start = self._mark()
        yield
        self.spans[key].append((start, self._mark()))

    def ms(self) -> dict[str, list[float]]:
        if self.cuda:
            torch.cuda.synchronize()
            return {k: [a.elapsed_time(b) for a, b in v] for k, v in self.spans.items()}
        return {k: [(b - a) * 1e3 for a, b in v] for k, v in self.spans.items()}


class TrainLoop:
    """One GPT-2 training loop as its user writes it: AdamW(lr=1e-4), the forward under
    autocast in ``dtype`` (None: fp32, at ``matmul_precision``), GradScaler with fp16, the
    loss of ``model(ids, labels=ids)``. ``prepare(model)`` changes the model on the device
    first (a plan, an FP8 conversion); ``watch`` is attached by the caller."""

    def __init__(self, ctx, config: dict, batch: int, tokens: int, dtype, prepare=None,
                 matmul_precision: str = "highest"):
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(**config)).to(ctx.dev).train()
        self.model = prepare(model) if prepare is not None else model
        self.dev, self.dtype, self.precision = ctx.dev, dtype, matmul_precision
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.scaler = torch.amp.GradScaler(ctx.dev) if dtype == torch.float16 else None
        self.ids = torch.randint(0, config["vocab_size"], (batch, tokens), device=ctx.dev)
        self.watch = None
        self.losses: list = []

    def step(self) -> None:
        saved = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(self.precision)
        try:
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast(self.dev, dtype=self.dtype or torch.float16, enabled=self.dtype is not None):
                loss = self.model(input_ids=self.ids, labels=self.ids).loss
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.opt)
                self.scaler.update()
            else:
                loss.backward()
                self.opt.step()
            if self.watch is not None:
                self.watch.step(loss)
            self.losses.append(loss.detach())
        finally:
            torch.set_float32_matmul_precision(saved)

    def summary(self, times: list[float]) -> dict:
        losses = [v.item() for v in self.losses]
        out = {"steps_timed": len(times), "loss_first": losses[0] if losses else None,
               "loss_last": losses[-1] if losses else None, "finite": all(math.isfinite(v) for v in losses)}
        if times:
            out.update(median_ms=statistics.median(times), min_ms=min(times), max_ms=max(times))
        return out


def interleaved(ctx, loops: dict, warmup: int, steps: int, budget) -> tuple[dict, dict]:
    """Run ``loops`` side by side: each round steps every loop once, in an order that rotates,
    so that drift and a step's position in the round hit all alike; the first ``warmup`` rounds
    untimed. A loop that raises leaves the rotation with its error. ({name: step ms}, {name: error})."""
    clock, errors = Clock(ctx), {}
    names = list(loops)
    for r in range(warmup + steps if names else 0):
        if budget.left() < 0:
            break
        for name in names[r % len(names):] + names[:r % len(names)]:
            if name in errors:
                continue
            try:
                if r < warmup:
                    loops[name].step()
                else:
                    with clock.span(name):
                        loops[name].step()
            except Exception as exc:  # noqa: BLE001 - one variant's failure is its row's result
                errors[name] = failure(exc, first_line=True)
    times = clock.ms()
    return {name: times.get(name, []) for name in names}, errors


def forward_gemm_low_share(model, ids, dtype, amp: bool, device: str):
    """The share of one forward's GEMM FLOPs in fp16/bf16 as they ran (check's
    ``gemm_flops_low_precision``), with the plan applied if it is."""
    from precisionaudit.check.pytorch.flops import GemmFlops

    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=amp), GemmFlops() as flops:
        model(input_ids=ids)
    return flops.low_share()


def plan_entries(plan_text: str) -> list[str]:
    """A written plan's overrides as ``module[ops]`` (``*``: the whole module)."""
    import yaml

    try:
        overrides = (yaml.safe_load(plan_text) or {}).get("overrides") or []
    except yaml.YAMLError:
        return []
    return [f"{o.get('module') or '<root>'}[{','.join(o['ops']) if o.get('ops') else '*'}]" for o in overrides]


def write_plan(ctx, model_file: str, *flags) -> tuple[str | None, str]:
    """``precisionaudit plan`` on ``model_file`` (in this process), written in the run's temporary
    folder: (the plan's path or None, its text or the error)."""
    plan = os.path.join(ctx.tmp, os.path.basename(model_file)[:-3] + "_plan.yaml")
    code, _, err = cli("plan", model_file, *flags, "--timeout", "120", "-o", plan)
    if code != 0:
        return None, f"plan failed ({code}): {err.strip()[-300:]}"
    with open(plan) as f:
        return plan, f.read()


#: AMP and AMP + plan side by side first (the target), then the rest
STEP_GROUPS = [("eager", ["amp fp16", "amp fp16 + plan"]), ("sdpa", ["amp fp16", "amp fp16 + plan"]),
               ("eager", ["fp32", "fp32+tf32"]), ("sdpa", ["fp32", "amp bf16"])]


def step_loop(ctx, cfg: dict, batch: int, tokens: int, variant: str, plan: str | None):
    """The TrainLoop of one table-4 variant, and the handle of the plan applied to it (or None)."""
    import precisionaudit

    dtype = None if variant.startswith("fp32") else torch.bfloat16 if "bf16" in variant else torch.float16
    loop = TrainLoop(ctx, cfg, batch, tokens, dtype, matmul_precision="high" if "tf32" in variant else "highest")
    return loop, precisionaudit.apply_plan(loop.model, plan) if "plan" in variant else None


def table_step_time(ctx, section, budget):
    config, batch, tokens, warmup, steps = gpt2_sizes(ctx.dry)
    section["notes"].append(f"GPT2LMHeadModel {config}, batch {batch}x{tokens}, AdamW(lr=1e-4, foreach), loss = "
                            f"model(ids, labels=ids).loss; {warmup} warm-up steps, median of {steps}; the variants "
                            "of a line below run side by side (one step each per round, the order rotating); "
                            f"{'CUDA events, no host sync between steps' if ctx.cuda else 'perf_counter (DRY RUN, CPU)'}; "
                            "fp32 = TF32 off (PyTorch's default), fp32+tf32 = set_float32_matmul_precision('high'); "
                            "AMP fp16 with GradScaler; plan = `precisionaudit plan` on the same config, applied with "
                            "apply_plan")
    rows, plans = section["rows"], {}
    for attn in ("eager", "sdpa"):
        cfg = dict(config, attn_implementation=attn)
        path = os.path.join(ctx.tmp, f"gpt2_{attn}.py")
        with open(path, "w") as f:
            f.write(GPT2_MODEL_FILE.format(config=cfg, vocab=cfg["vocab_size"], batch=batch, tokens=tokens))
        plans[attn] = write_plan(ctx, path)
        section.setdefault("plans", {})[attn] = plans[attn][1]
    for attn, variants in STEP_GROUPS:
        if not reached(section, budget, f"{attn} {', '.join(variants)}"):
            continue
        cfg = dict(config, attn_implementation=attn)
        plan, plan_text = plans[attn]
        loops, handles, group = {}, {}, []
        for variant in variants:
            row = {"attention": attn, "variant": variant,
                   "plan_overrides": plan_entries(plan_text) if "plan" in variant else None}
            group.append(row)
            try:
                if "plan" in variant and plan is None:
                    raise RuntimeError(plan_text)
                loops[variant], handles[variant] = step_loop(ctx, cfg, batch, tokens, variant, plan)
            except Exception as exc:  # noqa: BLE001
                row["error"] = failure(exc)
        times, errors = interleaved(ctx, loops, warmup, steps, budget)
        for row in group:
            loop = loops.get(row["variant"])
            if loop is None:
                continue
            row.update(loop.summary(times[row["variant"]]))
            if row["variant"] in errors:
                row["error"] = errors[row["variant"]]
            else:
                row["gemm_flops_low_precision"] = forward_gemm_low_share(
                    loop.model, loop.ids, loop.dtype or torch.float16, loop.dtype is not None, ctx.dev)
            if handles[row["variant"]] is not None:
                row["plan_unmatched"] = [o.module for o in handles[row["variant"]].unmatched]
        rows.extend(group)
        del loops, handles
        if ctx.cuda:
            torch.cuda.empty_cache()
        for row in group:
            ctx.results.log(f"step time {attn} {row['variant']}: {row.get('median_ms', row.get('error'))}")
        _step_table(ctx, section)


def _step_table(ctx, section):
    rows = section["rows"]
    med = {(r["attention"], r["variant"]): r.get("median_ms") for r in rows}
    body = []
    for r in rows:
        amp = med.get((r["attention"], "amp fp16"))
        fp32 = med.get((r["attention"], "fp32"))
        m = r.get("median_ms")
        share = r.get("gemm_flops_low_precision")
        body.append([r["attention"], r["variant"], "" if m is None else round(m, 2),
                     "" if m is None or not fp32 else round(fp32 / m, 2),
                     "" if m is None or not amp else round(m / amp, 3),
                     "" if share is None else f"{100 * share:.1f}%",
                     "; ".join(r["plan_overrides"]) if r.get("plan_overrides") is not None else "",
                     r.get("finite", ""), r.get("error", "")])
    lines = md_table(["attention", "variant", "median ms/step", "speed-up over fp32", "time / AMP fp16",
                      "GEMM FLOPs low (forward)", "plan overrides", "losses finite", "error"], body)
    lines += ["", "targets (issues 28, 36): plan at most 1.03 x AMP, eager and SDPA; AMP at least 2 x fp32; "
              "at least 97% of GEMM FLOPs in fp16 with the plan"]
    for attn in ("eager", "sdpa"):
        amp, planned = med.get((attn, "amp fp16")), med.get((attn, "amp fp16 + plan"))
        if amp and planned:
            verdict = "met" if planned / amp <= 1.03 else "MISSED"
            lines.append(f"- {attn}: plan / AMP = {planned / amp:.3f} ({verdict})")
    ctx.results.table("4. step time", lines)
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 5. GEMM time: flagged shapes against their padded sizes, and FP8
# --------------------------------------------------------------------------------------
def time_op(ctx, fn, reps: int, inner: int) -> float:
    """Median ms of one call of ``fn`` over ``reps`` timings of ``inner`` back-to-back calls."""
    for _ in range(3):
        fn()
    ctx.sync()
    clock = Clock(ctx)
    for _ in range(reps):
        with clock.span("op"):
            for _ in range(inner):
                fn()
    times = [ms / inner for ms in clock.ms()["op"]]
    return statistics.median(times)


def gemm_cases(dry: bool) -> list[tuple[str, str, dict]]:
    """(group, label, shape) of each timed op; the dry run divides the sizes."""
    s = 16 if dry else 1
    cases = []
    for n in (50257, 50304):
        cases.append(("PA202 lm_head vocab", f"N={n}", dict(kind="linear", m=8 * 512 // s, k=768, n=n // s)))
    for k in (100, 104, 128):
        cases.append(("PA201 GEMM K", f"K={k}", dict(kind="linear", m=4096 // s, k=k, n=4096 // s)))
    for d in (64, 80, 96):
        for kind in ("qk", "pv", "sdpa"):
            cases.append((f"PA206 head dim ({kind})", f"d={d}", dict(kind=kind, b=8 // (2 if dry else 1),
                                                                    h=12, t=512 // s, d=d)))
    return cases


def _gemm_fn(ctx, case: dict, dtype):
    dev = ctx.dev
    if case["kind"] == "linear":
        x = torch.randn(case["m"], case["k"], device=dev, dtype=dtype)
        w = torch.randn(case["n"], case["k"], device=dev, dtype=dtype)
        flops = 2 * case["m"] * case["n"] * case["k"]
        return (lambda: torch.nn.functional.linear(x, w)), flops
    b, h, t, d = case["b"], case["h"], case["t"], case["d"]
    q, k, v = (torch.randn(b, h, t, d, device=dev, dtype=dtype) for _ in range(3))
    if case["kind"] == "qk":
        kt = k.transpose(-1, -2)
        return (lambda: torch.matmul(q, kt)), 2 * b * h * t * t * d
    if case["kind"] == "pv":
        p = torch.randn(b, h, t, t, device=dev, dtype=dtype)
        return (lambda: torch.matmul(p, v)), 2 * b * h * t * t * d
    return (lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)), 2 * b * h * t * t * d


def table_gemm(ctx, section, budget):
    reps, inner = (3, 1) if ctx.dry else (30, 10)
    section["notes"].append(f"median of {reps} timings of {inner} back-to-back calls, after 3 warm-ups; "
                            f"{'CUDA events' if ctx.cuda else 'perf_counter, DRY RUN on CPU at sizes / 16'}; "
                            "random normal data; TFLOP/s counts the op's own FLOPs (the padded shape does more work)")
    rows = section["rows"]
    dtypes = [torch.float16, torch.bfloat16] if ctx.cuda else [torch.bfloat16]
    for dtype in dtypes:
        for group, label, case in gemm_cases(ctx.dry):
            if budget.left() < 0:
                section["notes"].append(f"not reached within the budget: {group} {label} {dtype}")
                continue
            row = {"group": group, "shape": label, "dtype": str(dtype).split(".")[-1], "case": case}
            try:
                fn, flops = _gemm_fn(ctx, case, dtype)
                ms = time_op(ctx, fn, reps, inner)
                row.update(ms=ms, tflops=flops / ms / 1e9)
            except Exception as exc:  # noqa: BLE001
                row["error"] = failure(exc)
            rows.append(row)
        _gemm_table(ctx, section)
    for label, m, k, n in (("N=50304 (16-divisible)", 4096, 768, 50304), ("N=50257", 4096, 768, 50257),
                           ("K=104 (8-divisible, not 16)", 4096, 104, 4096), ("K=100", 4096, 100, 4096),
                           ("K=128", 4096, 128, 4096)):
        if budget.left() < 0:
            break
        if ctx.dry:
            m, n = m // 16, max(16, n // 16)
        row = {"group": "FP8 torch._scaled_mm e4m3 -> bf16", "shape": label, "dtype": "float8_e4m3fn",
               "case": dict(m=m, k=k, n=n)}
        try:
            a = torch.randn(m, k, device=ctx.dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=ctx.dev).to(torch.float8_e4m3fn).t()  # column-major (k, n)
            one = torch.tensor(1.0, device=ctx.dev)
            fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
            ms = time_op(ctx, fn, reps, inner)
            row.update(ms=ms, tflops=2 * m * n * k / ms / 1e9)
        except Exception as exc:  # noqa: BLE001 - the expected refusal of a non-divisible shape
            row["error"] = failure(exc, first_line=True)
        rows.append(row)
    _gemm_table(ctx, section)


def _gemm_table(ctx, section):
    body = [[r["group"], r["shape"], r["dtype"], "" if "ms" not in r else round(r["ms"] * 1e3, 1),
             "" if "tflops" not in r else round(r["tflops"], 1), r.get("error", "")] for r in section["rows"]]
    ctx.results.table("5. GEMM time", md_table(["rule / op", "shape", "dtype", "median µs", "TFLOP/s", "error"], body))
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 7. the watch: its cost in a GPT-2 training loop, its replay, its demonstrations on CUDA
# --------------------------------------------------------------------------------------
WATCH_TARGETS = {"default_x_plain": 1.01, "replay_steps": 15.0}
#: the demonstrations of tests/test_watch.py (tests/watch_loops.py), 20 steps as there
WATCH_DEMOS = [("forward overflow: exp in Gated", "Gated", "gated_batch"),
               ("masked log: where(p > 0, log p, 0) in Entropy", "Entropy", "entropy_batch")]
WATCH_DEMO_STEPS = 20


def default_every() -> int:
    """``precisionaudit.watch``'s default sampling period."""
    import inspect

    from precisionaudit.watch import watch

    return inspect.signature(watch).parameters["every"].default


def watch_overhead(ctx, dtype, budget) -> dict:
    """Three identical GPT-2 loops side by side: plain, watched at the default ``every``,
    watched at ``every=1``; then one forced trigger of the default watch (its replay of the
    last step, timed)."""
    import precisionaudit
    from precisionaudit.watch.log import read_log

    config, batch, tokens, warmup, steps = gpt2_sizes(ctx.dry)
    every = default_every()
    loops = {name: TrainLoop(ctx, config, batch, tokens, dtype) for name in ("plain", "default", "every=1")}
    logs = {}
    for name, period in (("default", every), ("every=1", 1)):
        loop = loops[name]
        logs[name] = tempfile.mkdtemp(prefix=f"watch_{name}_", dir=ctx.tmp)
        loop.watch = precisionaudit.watch(loop.model, loop.opt, loop.scaler, log_dir=logs[name], every=period)
    times, errors = interleaved(ctx, loops, warmup, steps, budget)
    row = {"dtype": str(dtype).split(".")[-1], "scaler": dtype == torch.float16, "every_default": every,
           "batch": f"{batch}x{tokens}", **{name: loops[name].summary(times[name]) for name in loops}}
    if errors:
        row["errors"] = errors
    watch = loops["default"].watch
    ctx.sync()
    started = time.perf_counter()
    watch._trigger(watch.steps - 1, "forced")  # what a skipped step's trigger does: replay, gather, log
    ctx.sync()
    row["trigger_ms"] = (time.perf_counter() - started) * 1e3
    for loop in loops.values():
        if loop.watch is not None:
            loop.watch.close()
    triggers = [e for e in read_log(logs["default"])[0] if e["event"] == "trigger"]
    replay = (triggers[-1].get("replays") or [None])[0] if triggers else None
    row["trigger_logged"] = [t["why"] for t in triggers]
    row["replay"] = {k: replay.get(k) for k in ("first", "seconds", "error")} if replay else None
    plain, always_on, sampled = (row[k].get("median_ms") for k in ("plain", "default", "every=1"))
    if plain and always_on and sampled:
        amortised = always_on + (sampled - always_on) / every
        row.update(default_x_plain=always_on / plain, every1_x_plain=sampled / plain,
                   amortised_x_plain=amortised / plain, replay_steps=row["trigger_ms"] / plain)
    del loops
    if ctx.cuda:
        torch.cuda.empty_cache()
    return row


def load_watch_loops():
    """tests/watch_loops.py, the loops tests/test_watch.py trains, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("watch_loops", os.path.join(ROOT, "tests", "watch_loops.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def watch_demo(ctx, loops, model_name: str, batches_name: str) -> dict:
    """One demonstration trained with the watch on CPU (as the tests do) and on the device:
    what each log names as the first non-finite op."""
    from precisionaudit.watch.log import read_log, summarize

    row = {}
    for side, device in (("cpu", "cpu"), ("cuda", ctx.dev)):
        torch.manual_seed(0)
        log = tempfile.mkdtemp(prefix=f"watch_demo_{side}_", dir=ctx.tmp)
        losses, _ = loops.train_fp16(getattr(loops, model_name)(), getattr(loops, batches_name), WATCH_DEMO_STEPS,
                                     log, device=device)
        report = summarize(read_log(log))
        first = report["first_nonfinite"] or {}
        row[side] = {"ran_on": device, **{k: first.get(k) for k in ("step", "phase", "module", "op", "aten", "dtype",
                                                                   "fp32_finite")},
                     "nonfinite_losses": sum(not math.isfinite(v) for v in losses),
                     "skipped_steps": (report["scaler"] or {}).get("skipped_steps")}
    row["same_module_op_phase"] = row["cpu"]["op"] is not None and all(
        row["cpu"][k] == row["cuda"][k] for k in ("module", "op", "phase"))
    return row


def table_watch(ctx, section, budget):
    config, batch, tokens, warmup, steps = gpt2_sizes(ctx.dry)
    section["notes"].append(
        f"GPT2LMHeadModel {config} (random init), batch {batch}x{tokens}, AdamW(lr=1e-4); fp16 autocast + "
        f"GradScaler, then bf16 autocast without a scaler (the watch's fused gradient check runs every step); "
        f"three identical loops side by side (one step each per round, order rotating), {warmup} warm-up rounds "
        f"(the watches attached before them), median of {steps}; "
        f"{'CUDA events, no host sync between steps' if ctx.cuda else 'perf_counter (DRY RUN, CPU)'}. "
        "default = precisionaudit.watch at its default every (its timed steps are the always-on ones: "
        "the sample falls in step 0); every=1 = every step sampled; amortised = default + (every=1 - default) "
        "/ every. Forced trigger: Watch._trigger on the default watch after its last step (the replay of "
        "that step with attribution, forward and backward, then the log), wall time with the device "
        f"synchronised before and after; targets: default <= {WATCH_TARGETS['default_x_plain']}x plain, "
        f"replay <= {WATCH_TARGETS['replay_steps']:g} plain steps")
    rows = section["rows"]
    for dtype in (torch.float16, torch.bfloat16):
        if not reached(section, budget, str(dtype)):
            continue
        row = attempt(watch_overhead, ctx, dtype, budget, dtype=str(dtype).split(".")[-1])
        if ctx.cuda:
            torch.cuda.empty_cache()
        rows.append(row)
        ctx.results.log(f"watch {row['dtype']}: default x{row.get('default_x_plain')}, "
                        f"replay {row.get('replay_steps')} steps {row.get('error', '')}")
        _watch_table(ctx, section)
    loops = load_watch_loops()
    demos = section.setdefault("demos", [])
    for name, model_name, batches_name in WATCH_DEMOS:
        if not reached(section, budget, name):
            continue
        row = {"demo": name, **attempt(watch_demo, ctx, loops, model_name, batches_name)}
        demos.append(row)
        ctx.results.log(f"watch demo {name}: same module/op/phase {row.get('same_module_op_phase')}")
        _watch_table(ctx, section)


def _replay_found(replay) -> str:
    if not replay:
        return "no replay logged"
    if replay.get("error"):
        return f"error: {replay['error']}"
    first = replay.get("first")
    return "nothing non-finite" if not first else f"{first.get('phase')} {first.get('module')!r} {first.get('op')}"


def _watch_table(ctx, section):
    def ms(r, k):
        return "" if r.get(k, {}).get("median_ms") is None else round(r[k]["median_ms"], 2)

    body = [[r["dtype"], ms(r, "plain"), ms(r, "default"), ms(r, "every=1"), r.get("default_x_plain", ""),
             r.get("amortised_x_plain", ""), r.get("every1_x_plain", ""),
             "" if "trigger_ms" not in r else round(r["trigger_ms"], 1), r.get("replay_steps", ""),
             _replay_found(r.get("replay")),
             r.get("error", "") or "; ".join(f"{k}: {v}" for k, v in (r.get("errors") or {}).items())]
            for r in section["rows"]]
    lines = md_table(["autocast", "plain ms", "watch default ms", "watch every=1 ms", "default / plain",
                      "amortised / plain", "every=1 / plain", "forced trigger ms", "replay in plain steps",
                      "replay found", "error"], body)
    for r in section["rows"]:
        for key, target in WATCH_TARGETS.items():
            if r.get(key) is not None:
                lines.append(f"- {r['dtype']}: {key} = {r[key]:.3f} (target <= {target:g}: "
                             f"{'met' if r[key] <= target else 'MISSED'})")
    demos = section.get("demos", [])
    if demos:
        def named(side):
            return f"step {side.get('step')}, {side.get('phase')}, {side.get('module')!r}, {side.get('op')} " \
                   f"({side.get('aten')}, {side.get('dtype')}); skipped {side.get('skipped_steps')}"
        lines += [""] + md_table(["demonstration", "CPU (fp16 CPU autocast)", "device", "same module, op, phase"],
                                 [[d["demo"], named(d.get("cpu", {})), named(d.get("cuda", {})),
                                   d.get("same_module_op_phase", d.get("error"))] for d in demos])
        lines.append("- a difference is not by itself a watch bug: CUDA's autocast runs softmax in fp32 where "
                     "CPU autocast keeps fp16 (what the masked-log demonstration relies on)")
    ctx.results.table("7. watch", lines)
    ctx.results.save()


# --------------------------------------------------------------------------------------
# 8. fp16 cumsum: CUDA's scan against the emulation's, each against fp64
# --------------------------------------------------------------------------------------
CUMSUM_MODEL = os.path.join(SAMPLES, "pa103_cumsum_hazard.py")
POSITIONS_PAD = 1  # RoBERTa's padding_idx, as create_position_ids_from_input_ids takes it


def hf_positions(ids: torch.Tensor, dtype) -> torch.Tensor:
    """transformers' ``create_position_ids_from_input_ids`` with its mask in ``dtype`` (a model
    that builds its masks in its own dtype, as tests/demos/positions_cumsum.py does)."""
    mask = ids.ne(POSITIONS_PAD).to(dtype)
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + POSITIONS_PAD


def padded_ids(rows: int, tokens: int) -> torch.Tensor:
    """Token ids, row i right-padded by 64 * i (padding_idx 1)."""
    ids = torch.randint(2, 1000, (rows, tokens), generator=torch.Generator().manual_seed(0))
    for i in range(rows):
        if i:
            ids[i, tokens - 64 * i:] = POSITIONS_PAD
    return ids


def cumsum_cases(ctx) -> list[tuple[str, str, object, object]]:
    """(case, CUDA kernel path, fn(x, on) -> result, its input): ``fn`` runs on CUDA, on CPU under
    the check's emulation, and in fp64 (``on`` names which)."""
    from precisionaudit.runtime.pytorch.source import open_source
    from precisionaudit.runtime.sources import LoadOptions

    source = open_source(CUMSUM_MODEL, LoadOptions())
    torch.manual_seed(0)
    model = source.make_model().eval()
    (x,) = source.make_inputs()

    def whole_model(v, on):
        m = copy.deepcopy(model).to(v.device, torch.float64 if on == "fp64" else torch.float16)
        return m(v)

    with torch.no_grad():
        scanned = model.proj(x).half()  # the values pa103's cumsum reads, in fp16
    cases = [("pa103_cumsum_hazard, the model (pure fp16: Linear, then cumsum over 4096 steps)",
              "outer dimension: one add after the other", whole_model, x),
             ("pa103's cumsum alone, on its fp16 Linear output (1x4096x64, dim 1)",
              "outer dimension: one add after the other", lambda v, on: v.cumsum(1), scanned)]
    for dtype in (torch.float16, torch.bfloat16):
        for rows, path in ((1, "one row: CUB device scan"), (8, "innermost dimension: tiles, Sklansky")):
            ids = padded_ids(rows, 4096)
            cases.append((f"positions (create_position_ids_from_input_ids), mask in {str(dtype)[6:]}, "
                          f"{rows}x4096", path,
                          lambda v, on, dtype=dtype: hf_positions(v, torch.float64 if on == "fp64" else dtype), ids))
    return cases


def cumsum_row(ctx, case: str, path: str, fn, x) -> dict:
    emulated = Side("cpu-emulated")
    floating = x.is_floating_point()
    with torch.no_grad():
        reference = fn(x.double() if floating else x, "fp64").double()
        on_device = fn((x.half() if floating else x).to(ctx.dev), "device").cpu().double()
        with emulated.numerics():
            emulation = fn(x.half() if floating else x, "emulated").double()

    def err(a, b):
        return (a - b).abs().max().item()

    return {"case": case, "kernel": path, "shape": list(x.shape),
            "device_ran_on": ctx.dev if ctx.cuda else "cpu (DRY RUN: CPU's own kernel)",
            "device_max_abs": err(on_device, reference), "emulated_max_abs": err(emulation, reference),
            "device_vs_emulated_max_abs": err(on_device, emulation),
            "equal_share": (on_device == emulation).double().mean().item(),
            "reference_max_abs_value": reference.abs().max().item()}


def table_cumsum(ctx, section, budget):
    section["notes"].append(
        "CUDA's cumsum keeps its running value in the input's dtype (scan_dim<scalar_t>); the check emulates it "
        "(runtime/pytorch/low_accumulation.py, under the cpu-emulated runtime's numerics, as `check` runs it). "
        "Each case runs on the device, emulated on CPU, and in fp64 from the same fp16 values (the model: from "
        "the same fp32 weights and input); max_abs of each against fp64, and of the device against the "
        "emulation. The emulation reproduces the size of the error, not its bits (CUB's tiling is the "
        "library's choice)" + ("; DRY RUN: the device side is CPU's kernel (fp32 accumulation)" if not ctx.cuda else ""))
    for case, path, fn, x in cumsum_cases(ctx):
        if not reached(section, budget, case):
            continue
        row = attempt(cumsum_row, ctx, case, path, fn, x, case=case, kernel=path)
        section["rows"].append(row)
        ctx.results.log(f"cumsum {case}: device {row.get('device_max_abs')}, emulated {row.get('emulated_max_abs')}")
        body = [[r["case"], r["kernel"], r.get("device_max_abs", ""), r.get("emulated_max_abs", ""),
                 r.get("device_vs_emulated_max_abs", ""), r.get("equal_share", ""), r.get("error", "")]
                for r in section["rows"]]
        ctx.results.table("8. fp16 cumsum", md_table(
            ["case", "CUDA kernel", "device max_abs vs fp64", "emulated max_abs vs fp64", "device vs emulated",
             "equal elements", "error"], body))
        ctx.results.save()


# --------------------------------------------------------------------------------------
# 9. real FP8 (torchao): its error against the emulation's, and its step time
# --------------------------------------------------------------------------------------
FP8_OUTLIER = os.path.join(SAMPLES, "check_fp8_outlier.py")
FP8_RECIPES = ("tensorwise", "rowwise")
#: GPT-2 with nn.Linear for transformers' Conv1D (the same x @ W + b): convert_to_float8_training
#: swaps nn.Linear modules only, so transformers' GPT-2 itself would run no GEMM in FP8
GPT2_LINEAR_MODEL_FILE = '''"""GPT-2, its Conv1D layers as nn.Linear, for bench/gpu_truth.py's FP8 table (generated)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.pytorch_utils import Conv1D


def linear_gpt2(model):
    """Every Conv1D (y = x @ W + b, W of shape (in, out)) replaced by the equal nn.Linear."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Conv1D):
                linear = torch.nn.Linear(*child.weight.shape, device=child.weight.device, dtype=child.weight.dtype)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    linear.bias.copy_(child.bias)
                setattr(module, name, linear)
    return model


def get_model():
    torch.manual_seed(0)
    return linear_gpt2(GPT2LMHeadModel(GPT2Config(**{config!r}))).eval()


def get_example_inputs():
    return {{"input_ids": torch.randint(0, {vocab}, ({batch}, {tokens}))}}
'''


def load_file(path: str):
    """A Python file as a module (a generated model file)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torchao_float8():
    """torchao.float8's (convert_to_float8_training, Float8LinearConfig, version), quietly imported."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchao
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    return convert_to_float8_training, Float8LinearConfig, torchao.__version__


def _logits(out):
    return out.logits if hasattr(out, "logits") else out


def _snr_db(x: torch.Tensor, reference: torch.Tensor) -> float | None:
    noise = (x - reference).square().sum().item()
    return 10 * math.log10(reference.square().sum().item() / noise) if noise else None


def fp8_error_row(ctx, make_model, inputs: tuple, recipe: str, keep_out=()) -> dict:
    """One model's output and per-GEMM SQNR under FP8 ``recipe``, real (torchao's
    convert_to_float8_training on the device, bf16 autocast) and emulated (check --dtype
    float8's path: CPU, CUDA's bf16 autocast emulated, runtime/pytorch/fp8.py's GEMMs), the
    same Linears converted on both sides (the check's choice: dims multiples of 16, less
    ``keep_out``), each against the fp64 forward of the same weights and inputs."""
    from precisionaudit.check.pytorch import quantized as check_fp8

    convert, config_for, _ = torchao_float8()
    torch.manual_seed(0)
    model = make_model().eval()
    with torch.no_grad():
        reference = _logits(copy.deepcopy(model).double()(*[_double(t) for t in inputs])).double()
    emulated_model = copy.deepcopy(model)
    choice = check_fp8.choose(emulated_model, recipe, keep_out)
    side = Side("cpu-emulated")
    with torch.no_grad(), side.numerics(), side.autocast(torch.bfloat16), check_fp8.quantized_linears(emulated_model, choice):
        emulated = _logits(emulated_model(*inputs)).double()
    chosen = set(choice.modules)
    real_model = convert(copy.deepcopy(model).to(ctx.dev), module_filter_fn=lambda mod, fqn: fqn in chosen,
                         config=config_for.from_recipe_name(recipe))
    sums: dict = {}
    hooks = [module.register_forward_hook(
        lambda m, args, out, path=path: check_fp8._measure(sums.setdefault(path, [0.0, 0.0]), args[0], m, out))
        for path, module in real_model.named_modules() if path in chosen]
    try:
        with torch.no_grad(), torch.autocast(ctx.dev, dtype=torch.bfloat16):
            real = _logits(real_model(*[t.to(ctx.dev) for t in inputs])).double().cpu()
    finally:
        for hook in hooks:
            hook.remove()
    real_gemm = {p: 10 * math.log10(s / n) if s and n else None for p, (s, n) in sums.items()}
    emulated_gemm = choice.gemm_snr_db()

    def worst(snr):
        known = {p: v for p, v in snr.items() if v is not None}
        return min(known.items(), key=lambda kv: kv[1]) if known else None

    return {"recipe": recipe, "kept_out": list(keep_out), "fp8_linears": len(chosen),
            "real": {"max_abs": (real - reference).abs().max().item(), "snr_db": _snr_db(real, reference),
                     "worst_gemm": worst(real_gemm)},
            "emulated": {"max_abs": (emulated - reference).abs().max().item(), "snr_db": _snr_db(emulated, reference),
                         "worst_gemm": worst(emulated_gemm)},
            "real_vs_emulated_max_abs": (real - emulated).abs().max().item(),
            "gemm_snr_db": {p: [real_gemm.get(p), emulated_gemm.get(p)] for p in sorted(chosen)}}


def _double(t):
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def plan_keep_out(ctx, model_file: str, *flags) -> tuple[list[str] | None, str]:
    """``plan --dtype float8``'s keep_out_of_fp8 for ``model_file`` (None and why where it failed)."""
    import yaml

    plan, text = write_plan(ctx, model_file, "--dtype", "float8", *flags)
    if plan is None:
        return None, text
    return list((yaml.safe_load(text) or {}).get("keep_out_of_fp8") or []), text


def fp8_step_loops(ctx, linear_gpt2, keep_out: list[str] | None) -> dict:
    """bf16 and FP8 (tensorwise) GPT-2 loops: every Linear converted (torchao's default), the
    plan's module_filter_fn (fqn not in keep_out_of_fp8), torchao's README filter (dims
    multiples of 16, not the output head)."""
    convert, config_for, _ = torchao_float8()
    config, batch, tokens, _, _ = gpt2_sizes(ctx.dry)
    fp8_config = config_for.from_recipe_name("tensorwise")
    filters = {"fp8 tensorwise, every Linear": None,
               "fp8 tensorwise + plan filter": (lambda mod, fqn: fqn not in set(keep_out or ())),
               "fp8 tensorwise, torchao README filter": (
                   lambda mod, fqn: fqn != "lm_head" and mod.in_features % 16 == 0 and mod.out_features % 16 == 0)}
    loops = {"bf16": TrainLoop(ctx, config, batch, tokens, torch.bfloat16, prepare=linear_gpt2)}
    for name, keep in filters.items():
        if "plan" in name and keep_out is None:
            continue
        loops[name] = TrainLoop(ctx, config, batch, tokens, torch.bfloat16, prepare=lambda m, keep=keep: convert(
            linear_gpt2(m), module_filter_fn=keep, config=fp8_config))
    return loops


def table_fp8(ctx, section, budget):
    if ctx.cuda and torch.cuda.get_device_capability() < (8, 9):
        major, minor = torch.cuda.get_device_capability()
        section["status"] = f"skipped: compute capability {major}.{minor} < 8.9 (no FP8 GEMMs)"
        return
    try:
        *_, version = torchao_float8()
    except Exception as exc:  # noqa: BLE001 - not installed, or not importable with this torch
        section["status"] = "skipped: torchao not available"
        section["notes"].append(f"torchao not available: {failure(exc)}")
        return
    config, batch, tokens, warmup, steps = gpt2_sizes(ctx.dry)
    section["torchao"] = version
    section["notes"].append(
        f"torchao {version}. Error rows: real = convert_to_float8_training on the device, forward under bf16 "
        "autocast; emulated = check --dtype float8's path on CPU; the same Linears on both sides (dims multiples "
        "of 16, less the plan's keep_out_of_fp8); each against the fp64 forward; worst GEMM = the lowest SQNR of "
        "one FP8 GEMM against the fp32 GEMM of its own operands (check's gemm_snr_db). GPT-2: transformers' "
        "GPT-2 with its Conv1D layers as the equal nn.Linear (torchao converts nn.Linear only), batch 1x128 "
        f"for the errors; step times at {batch}x{tokens}, AdamW, bf16 autocast, {warmup} warm-up rounds, median "
        f"of {steps}, loops side by side, eager (no torch.compile: torchao's speed-ups need it, so this "
        "measures what the casts cost and what the plan's keep-outs change)"
        + ("; DRY RUN: 'real' is torchao on CPU (torch._scaled_mm's CPU kernel)" if not ctx.cuda else ""))
    rows = section["rows"]
    outlier = load_file(FP8_OUTLIER)
    keep, text = plan_keep_out(ctx, FP8_OUTLIER, "--data", "example")
    section["outlier_plan_keep_out"] = keep if keep is not None else text
    torch.manual_seed(0)
    outlier_inputs = outlier.get_example_inputs()
    gpt2_file = os.path.join(ctx.tmp, "gpt2_linear.py")
    with open(gpt2_file, "w") as f:
        f.write(GPT2_LINEAR_MODEL_FILE.format(config=config, vocab=config["vocab_size"], batch=batch, tokens=tokens))
    gpt2 = load_file(gpt2_file)
    gpt2_keep, text = plan_keep_out(ctx, gpt2_file)
    section["gpt2_plan_keep_out"] = gpt2_keep if gpt2_keep is not None else text
    gpt2_inputs = (torch.randint(0, config["vocab_size"], (1, 128)),)
    items = [("check_fp8_outlier.py", outlier.get_model, outlier_inputs, recipe, kept)
             for recipe in FP8_RECIPES for kept in ((), tuple(keep or ()))] + \
            [("GPT-2 small, nn.Linear", gpt2.get_model, gpt2_inputs, recipe, tuple(gpt2_keep or ()))
             for recipe in FP8_RECIPES]
    for name, make_model, inputs, recipe, kept in items:
        if not reached(section, budget, f"{name} {recipe} keep {list(kept)}"):
            continue
        row = attempt(fp8_error_row, ctx, make_model, inputs, recipe, kept, recipe=recipe, kept_out=list(kept))
        rows.append({"model": name, **row})
        ctx.results.log(f"fp8 {name} {recipe} keep {list(kept)}: {row.get('real', row.get('error'))}")
        _fp8_table(ctx, section)
    if not reached(section, budget, "the step times"):
        return
    loops = fp8_step_loops(ctx, gpt2.linear_gpt2, gpt2_keep)
    times, errors = interleaved(ctx, loops, warmup, steps, budget)
    section["step_times"] = [{"variant": name, **loop.summary(times[name]),
                              **({"error": errors[name]} if name in errors else {})} for name, loop in loops.items()]
    del loops
    if ctx.cuda:
        torch.cuda.empty_cache()
    _fp8_table(ctx, section)


def _fp8_table(ctx, section):
    def side(r, key):
        v = r.get(key) or {}
        worst = v.get("worst_gemm")
        return "" if not v else (f"max_abs {v['max_abs']:.3g}, SNR {_db(v['snr_db'])}; worst GEMM "
                                 f"{worst[0] + ' ' + _db(worst[1]) if worst else '-'}")
    body = [[r["model"], r["recipe"], ", ".join(r.get("kept_out") or []) or "-", r.get("fp8_linears", ""),
             side(r, "real"), side(r, "emulated"), r.get("real_vs_emulated_max_abs", ""), r.get("error", "")]
            for r in section["rows"]]
    lines = md_table(["model", "recipe", "kept out of FP8", "FP8 Linears", "real (torchao)", "emulated (check)",
                      "real vs emulated max_abs", "error"], body)
    steps = section.get("step_times")
    if steps:
        bf16 = next((s.get("median_ms") for s in steps if s["variant"] == "bf16"), None)
        lines += [""] + md_table(["GPT-2 small (nn.Linear) variant", "median ms/step", "time / bf16", "losses finite",
                                  "error"],
                                 [[s["variant"], "" if s.get("median_ms") is None else round(s["median_ms"], 2),
                                   "" if s.get("median_ms") is None or not bf16 else round(s["median_ms"] / bf16, 3),
                                   s.get("finite", ""), s.get("error", "")] for s in steps])
    ctx.results.table("9. real FP8", lines)
    ctx.results.save()


def _db(value) -> str:
    return "-" if value is None else f"{value:.1f} dB"


# --------------------------------------------------------------------------------------
# 6. the GPU-only tests
# --------------------------------------------------------------------------------------
def table_tests(ctx, section, budget):
    # not the dry-run test: it runs this script, which would run these tests again
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-k", "not dry_run",
               "tests/test_gpu.py"]
    try:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(30, budget.left()))
        tail = (proc.stdout + proc.stderr)[-3000:]
        section["rows"].append({"command": " ".join(command[1:]), "exit": proc.returncode, "tail": tail})
    except subprocess.TimeoutExpired as exc:
        tail = f"timed out after {exc.timeout:.0f} s"
        section["rows"].append({"command": " ".join(command[1:]), "exit": None, "tail": tail})
    ctx.results.log(tail)
    ctx.results.table("6. GPU tests", ["```", tail.strip(), "```"])
    ctx.results.save()


#: (table, function, budget in seconds), in the order they run: issue 38's measures first (the
#: watch, the plan's cost, cumsum, FP8), then tables 1-3 and 5 again, then the GPU tests; 420 s in
#: all, under the default --budget of 460 (the whole run within 8 minutes of GPU time)
SECTIONS = [("7. watch", table_watch, 60), ("4. step time", table_step_time, 60),
            ("8. fp16 cumsum", table_cumsum, 20), ("9. real FP8", table_fp8, 60),
            ("1. dtypes", table_dtypes, 85), ("2. numerics", table_numerics, 50),
            ("3. training steps", table_training, 25), ("5. GEMM time", table_gemm, 20),
            ("6. GPU tests", table_tests, 40)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes: exercise every code path")
    parser.add_argument("--out", default=None, help="output folder (default: $OUT, else /tmp/gpu_truth)")
    parser.add_argument("--json", default=None, help="also write the results JSON to this file")
    parser.add_argument("--budget", type=float, default=460.0, help="seconds before the watchdog ends the run")
    parser.add_argument("--all-models", action="store_true", help="dry run: every model of the dtype table and every numerics demonstration")
    parser.add_argument("--dtypes", default="float16,bfloat16", help="dtype table: the autocast dtypes")
    parser.add_argument("--only", default="", help="comma-separated section numbers to run (e.g. 1,4)")
    args = parser.parse_args(argv)
    out = args.out or os.environ.get("OUT") or "/tmp/gpu_truth"
    results = Results(out, args.json)
    watchdog = Watchdog(results, args.budget)
    watchdog.start()
    ctx = Context(args, results, watchdog)
    started = time.monotonic()
    try:
        results.data["environment"] = environment(ctx)
    except Exception as exc:  # noqa: BLE001
        results.data["environment"] = {"error": f"{type(exc).__name__}: {exc}"}
    if not ctx.dry and not torch.cuda.is_available():
        results.data["environment"]["warning"] = "no CUDA device: the 'real' side ran on CPU (like --dry-run)"
    results.log(f"environment: {results.data['environment']}")
    results.save()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    for name, fn, budget_s in SECTIONS:
        if only and name.split(".")[0] not in only:
            continue
        run_section(ctx, name, budget_s, fn)
    results.data["environment"]["total_wall_s"] = round(time.monotonic() - started, 1)
    results.save()
    results.log(f"done in {time.monotonic() - started:.0f} s; results in {out}")
    print(results.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
