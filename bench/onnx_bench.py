"""ONNX float16 conversion: precisionaudit's plan + check vs onnxconverter-common's search and ModelOpt AutoCast.

    python bench/onnx_bench.py

Each sample model is exported by both torch exporters (in a temporary directory) and
made float16 three ways, on the same generated inputs and at the same tolerance (the
check's float16 defaults: max |error| <= 1e-2 + 1e-2 * max |reference|, cosine >= 0.999):

* ``precisionaudit``: ``plan`` (static: no model run) then ``check --plan`` (3 runs:
  reference, baseline, planned);
* ``precisionaudit --prune``: ``plan --prune``, which keeps only the flagged hazards the
  float16 run needs and verifies the plan it writes (reference, baseline, then one
  planned run per attempt: 2 runs when the baseline passes);
* ``acmp``: ``auto_convert_mixed_precision`` as shipped (keep_io_types), which bisects
  the node list, judging each attempt by running the float16 model on onnxruntime's CPU
  provider as it is;
* ``acmp-emulated``: the same search, each attempt run through precisionaudit's float16
  emulation (every node's result rounded to float16) — what the search finds when it
  sees the numerics a GPU has;
* ``modelopt autocast`` (only where ``modelopt.onnx.autocast`` imports): NVIDIA ModelOpt's
  ``convert_to_mixed_precision`` with its default ``data_max`` (512) and ``init_max``
  (65504), keep_io_types, onnxruntime's CPU provider, given the bench's inputs as its
  ``calibration_data`` .npz: one fp32 reference run with every tensor an output, then
  every node whose input or output exceeds ``data_max`` (or whose initializer exceeds
  ``init_max``) stays fp32. It does not run the converted model.

Models with no-op ``Cast(to=float)`` nodes (the legacy exporter's ``.float()``) are given
to the two ``acmp`` rows with those nodes made ``Identity`` (unchanged in fp32): as
exported, every conversion attempt fails to load and the search dies (shown as
``acmp (as exported)``).

Columns: onnxruntime runs (``InferenceSession.run`` calls), wall time, share of the
graph's nodes left in float16 (nodes kept in fp32 by the plan / block list and by
onnxconverter-common's default op block list count against it), share of GEMM FLOPs in
float16, and the final model's verdict and error measured the same way for all (the
emulated float16 run against the fp32 reference: what a GPU would compute). Target
(issue 5): fewer runs and at least the same float16 share at the same tolerance.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # onnx_models.export: the tests' exporter

#: model files (sample_models/ or a path), and tiny Hugging Face encoders by name
#: (tests/onnx_models.ENCODERS: BERT and RoBERTa with their pooler, DistilBERT)
SAMPLES = ["check_clean.py", "check_exp_overflow.py", "check_mask_fill.py", "pa107_mask_hazard.py",
           "pa106_logits_hazard.py", os.path.join(HERE, "models", "onnx_softplus_gate.py"),
           "bert", "roberta", "distilbert", os.path.join(HERE, "models", "resnet50.py")]


class Counter:
    """Counts onnxruntime runs made through onnxconverter-common's helper."""

    def __init__(self, emulated: bool):
        self.runs, self.emulated, self.last_block_list = 0, emulated, None

    @contextlib.contextmanager
    def patched(self):
        from onnxconverter_common import auto_mixed_precision as acmp
        from onnxconverter_common import float16

        from precisionaudit.runtime.onnx.graph import FLOAT16
        from precisionaudit.runtime.onnx.emulate import emulate

        run, convert = acmp.get_tensor_values_using_ort, float16.convert_float_to_float16

        def counted(model, feeds, output_names=None, sess_options=None):
            self.runs += 1
            low = any(vi.type.tensor_type.elem_type == FLOAT16 for vi in model.graph.value_info)
            if self.emulated and low and output_names is None:
                model = emulate(model)[0]
            return run(model, feeds, output_names, sess_options)

        def recorded(model, *args, **kwargs):
            self.last_block_list = list(kwargs.get("node_block_list") or [])
            return convert(model, *args, **kwargs)

        acmp.get_tensor_values_using_ort, float16.convert_float_to_float16 = counted, recorded
        try:
            yield self
        finally:
            acmp.get_tensor_values_using_ort, float16.convert_float_to_float16 = run, convert


def final_error(model16, model, feeds, tol):
    """(status, max |error| / max |reference|) of a float16 model, run emulated; a model
    that onnxruntime does not load as it is raises (the emulation would retype it)."""
    import numpy as np

    from precisionaudit.runtime.onnx.io import session, verify

    verify(model16, "the final model")
    from precisionaudit.check.metrics import compare_all, variant_status
    from precisionaudit.runtime.onnx.emulate import emulate

    ref = session(model).run(None, feeds)
    got = session(emulate(model16)[0]).run(None, feeds)
    names = [o.name for o in model.graph.output]
    entries = compare_all([(n, np.asarray(r)) for n, r in zip(names, ref)],
                          {n: np.asarray(g) for n, g in zip(names, got)}, tol)
    worst = max((e["max_abs"] or 0) / (float(np.abs(r).max()) or 1) for e, r in zip(entries, ref)
                if "max_abs" in e)
    status = variant_status(entries)
    return status, None if status == "nonfinite" else worst


def shares(model, block_list, flops):
    from onnxconverter_common.float16 import DEFAULT_OP_BLOCK_LIST

    from precisionaudit.check.onnx.runner import _low_share

    kept = {n.name for n in model.graph.node if n.name in block_list or n.op_type in DEFAULT_OP_BLOCK_LIST}
    return 1 - len(kept) / len(model.graph.node), _low_share(flops, kept)


def scanned(path, target) -> list:
    """The scan's findings; a scan that fails (an internal error included) fails the row."""
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.scanner import scan

    results, findings = scan([path], target, load_rules())
    if results[0].status != "ok":
        raise RuntimeError(f"scan: {results[0].error}")
    return findings


def ours(path, tol, shapes):
    from precisionaudit.runtime.onnx.load import load_onnx
    from precisionaudit.check.onnx.runner import run_onnx_check
    from precisionaudit.core.target import Target
    from precisionaudit.plan.onnx import make_onnx_plan

    started = time.perf_counter()
    target = Target("float16", "pure")
    findings = scanned(path, target)
    plan, _ = make_onnx_plan(findings, load_onnx(path), target)
    report = run_onnx_check(path, plan=plan, tolerance=tol, input_shapes=shapes)
    planned = report["variants"][-1]
    rel = max(((o["max_abs"] or 0) / ((o["bound"] - tol.atol) / tol.rtol or 1)
               for o in planned["outputs"] if "max_abs" in o), default=None)
    return {"runs": report["executions"]["forward"], "wall": time.perf_counter() - started,
            "nodes": planned["nodes_low_precision"], "gemm": planned["gemm_flops_low_precision"],
            "status": planned["status"], "error": rel if planned["status"] != "error" else None,
            "baseline": report["variants"][1]["status"]}


def ours_pruned(path, tol, shapes, feeds, flops):
    from precisionaudit.apply.onnx import convert
    from precisionaudit.runtime.onnx.load import load_onnx
    from precisionaudit.core.target import Target
    from precisionaudit.prune.onnx import pruned_plan

    started = time.perf_counter()
    target = Target("float16", "pure")
    findings = scanned(path, target)
    model = load_onnx(path)
    plan, _, _, pruned = pruned_plan(findings, model, path, target, "warning", shapes, 0)
    wall = time.perf_counter() - started
    nodes, gemm = shares(model, set(convert(model, plan).kept), flops)
    status, rel = final_error(convert(model, plan, keep_io_types=True).model, model, feeds, tol)
    return {"runs": pruned.runs, "wall": wall, "nodes": nodes, "gemm": gemm,
            "status": status, "error": rel}


def acmp(model, original, feeds, tol, emulated, flops):
    import numpy as np
    from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision

    from precisionaudit.check.metrics import compare, variant_status

    def validate(ref, got):
        entries = [compare(str(i), np.asarray(r), np.asarray(g), tol)
                   for i, (r, g) in enumerate(zip(ref, got))]
        return variant_status(entries) == "ok"

    counter = Counter(emulated)
    started = time.perf_counter()
    try:
        with counter.patched(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model16 = auto_convert_mixed_precision(model, dict(feeds), validate, keep_io_types=True)
    except Exception as exc:  # noqa: BLE001 - a search that dies is a result
        return {"runs": counter.runs, "wall": time.perf_counter() - started, "nodes": None, "gemm": None,
                "status": f"fails: {str(exc).splitlines()[0][:70]}", "error": None}
    wall = time.perf_counter() - started
    nodes, gemm = shares(original, set(counter.last_block_list or ()), flops)
    status, rel = final_error(model16, original, feeds, tol)
    return {"runs": counter.runs, "wall": wall, "nodes": nodes, "gemm": gemm, "status": status, "error": rel}


class ModelOpt:
    """NVIDIA ModelOpt's AutoCast, when it imports (its [onnx] extra pulls CUDA wheels)."""

    def __init__(self):
        import logging

        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from modelopt.onnx.autocast import convert_to_mixed_precision
            from modelopt.onnx.autocast import precisionconverter
        for name in ("modelopt", "modelopt.onnx"):
            logging.getLogger(name).setLevel(logging.WARNING)
        logging.getLogger("modelopt.onnx.autocast").setLevel(logging.WARNING)
        self.convert, self.converter = convert_to_mixed_precision, precisionconverter.PrecisionConverter
        from modelopt import __version__
        self.version = __version__

    @contextlib.contextmanager
    def recorded(self, record):
        """Counts onnxruntime runs and records the node lists AutoCast converts with (after
        it moves the op types it has no low-precision support for to fp32)."""
        import onnxruntime

        session, converter = onnxruntime.InferenceSession, self.converter
        run, split = session.run, converter._filter_unsupported_op_types

        def counted(sess, *args, **kwargs):
            record["runs"] += 1
            return run(sess, *args, **kwargs)

        def kept(conv, high, low):
            high, low = split(conv, high, low)
            record["high"], record["low"] = list(high), list(low)
            return high, low

        session.run, converter._filter_unsupported_op_types = counted, kept
        try:
            yield record
        finally:
            session.run, converter._filter_unsupported_op_types = run, split

    def __call__(self, named_path, npz, original, feeds, tol, flops, **settings):
        from precisionaudit.check.onnx.runner import _low_share

        record = {"runs": 0, "high": [], "low": []}
        started = time.perf_counter()
        with self.recorded(record), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model16 = self.convert(named_path, "fp16", keep_io_types=True, calibration_data=npz,
                                   providers=["cpu"], **settings)
        wall = time.perf_counter() - started
        high, total = set(record["high"]), len(record["high"]) + len(record["low"])
        status, rel = final_error(model16, original, feeds, tol)
        rewritten = {n.name for n in original.graph.node} != high | set(record["low"])
        return {"runs": record["runs"], "wall": wall, "nodes": 1 - len(high) / total,
                "gemm": _low_share(flops, high), "status": status, "error": rel,
                "note": f"its sanitized graph has {total} nodes, not {len(original.graph.node)}" if rewritten else ""}


def modelopt_or_none():
    """ModelOpt's AutoCast, or None (with the reason on stderr) where it does not import."""
    try:
        return ModelOpt()
    except Exception as exc:  # noqa: BLE001 - an optional comparison
        print(f"modelopt autocast not run: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="*", default=SAMPLES, help="model files, encoder names, zoo:NAME")
    parser.add_argument("--zoo", action="store_true",
                        help="add issue 25's real architectures (bench/onnx_zoo.py: GPT-2, ViT, T5 and Whisper "
                             "encoders, ResNet, ConvNeXt)")
    parser.add_argument("--directory", help="export into (and reuse the exports in) this directory "
                                            "instead of a temporary one")
    parser.add_argument("--no-modelopt", action="store_true", help="leave ModelOpt AutoCast out")
    parser.add_argument("--ours-only", action="store_true",
                        help="only precisionaudit's rows (no onnxconverter-common search, no ModelOpt)")
    parser.add_argument("--dynamic", action="store_true",
                        help="export with dynamic axes (every input's batch, token inputs' sequence), as real "
                             "exports are; each method runs on the example inputs' shapes")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sys.path.insert(0, HERE)  # onnx_zoo
    import onnxconverter_common
    import onnxruntime
    import torch
    from onnx_models import ENCODERS, export, export_encoder, inputs_file
    from onnx_zoo import NAMES, PREFIX, export_zoo

    from precisionaudit.runtime.onnx.float16 import _no_op_casts_to_identity
    from precisionaudit.runtime.onnx.graph import name_nodes
    from precisionaudit.runtime.onnx.load import load_onnx
    from precisionaudit.runtime.onnx.inputs import make_inputs, resolve_shapes
    from precisionaudit.check.onnx.runner import _gemm_flops, _typed
    from precisionaudit.check.tolerance import tolerance_for

    import numpy as np
    import onnx

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    modelopt = None if args.no_modelopt or args.ours_only else modelopt_or_none()
    print(f"machine: {platform.processor() or platform.machine()}, onnxruntime {onnxruntime.__version__}, "
          f"onnxconverter-common {onnxconverter_common.__version__}, torch {torch.__version__}"
          + (f", modelopt {modelopt.version}" if modelopt else "") + "\n")
    print("| model | exporter | method | ORT runs | wall s | nodes fp16 | GEMM FLOPs fp16 | final (emulated fp16) "
          "| max err / max ref |")
    print("|---|---|---|---:|---:|---:|---:|---|---:|")
    tol = tolerance_for("float16")
    passed, pairs, results = {}, {}, {}
    with (contextlib.nullcontext(args.directory) if args.directory else tempfile.TemporaryDirectory()) as directory:
        for sample in args.samples + ([PREFIX + n for n in NAMES] if args.zoo else []):
            for dynamo in (False, True):
                torch.manual_seed(0)  # the same weights on every run of the benchmark
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exporter = (export_encoder if sample in ENCODERS
                                else export_zoo if sample.startswith(PREFIX) else export)
                    path = exporter(sample, directory, dynamo, args.dynamic)
                model = load_onnx(path)
                name_nodes(model.graph)
                shapes = {k: v.shape for k, v in np.load(inputs_file(path)).items()} if args.dynamic else {}
                feeds, _ = make_inputs(model, resolve_shapes(model, shapes, path), 0, path)
                flops = _gemm_flops(model, _typed(model, {k: v.shape for k, v in feeds.items()}))
                rows = [("precisionaudit", guarded(ours, path, tol, shapes)),
                        ("precisionaudit --prune", guarded(ours_pruned, path, tol, shapes, feeds, flops))]
                if not args.ours_only:
                    given = type(model)()
                    given.CopyFrom(model)
                    if _no_op_casts_to_identity(given):  # legacy exports: .float() as Cast(to=float)
                        rows.append(("acmp (as exported)", guarded(acmp, model, model, feeds, tol, False, flops)))
                    rows.append(("acmp", guarded(acmp, given, model, feeds, tol, False, flops)))
                    rows.append(("acmp-emulated", guarded(acmp, given, model, feeds, tol, True, flops)))
                if modelopt is not None:  # the same inputs as its calibration data, the same node names
                    stem = path[:-len(".onnx")]
                    np.savez(stem + "_calibration.npz", **feeds)
                    onnx.save(model, stem + "_named.onnx")
                    rows.append(("modelopt autocast", guarded(modelopt, stem + "_named.onnx",
                                                              stem + "_calibration.npz", model, feeds, tol, flops)))
                for method, r in rows:
                    passed[method] = passed.get(method, 0) + (r["status"] == "ok")
                    pairs[method] = pairs.get(method, 0) + 1
                    results.setdefault(method, []).append(r)
                for method, r in rows:
                    status = r["status"] + (f" (baseline {r['baseline']})" if "baseline" in r else "")
                    status += f" ({r['note']})" if r.get("note") else ""
                    print(f"| {os.path.basename(sample)} | {'dynamo' if dynamo else 'legacy'} | {method} | {r['runs']} "
                          f"| {r['wall']:.2f} | {_pct(r['nodes'])} | {_pct(r['gemm'])} | {status} "
                          f"| {_e(r['error'])} |")
    print("\n" + "; ".join(f"{method}: {passed[method]} of {pairs[method]} ok" for method in pairs))
    print("\n| method | ok | mean / median fp16 node share of the ok pairs | median wall s |")
    print("|---|---:|---:|---:|")
    for method, rs in results.items():
        print(f"| {method} | {passed[method]} of {pairs[method]} | {_shares([r for r in rs if r['status'] == 'ok'])} "
              f"| {_median([r['wall'] for r in rs]):.2f} |")
    return 0


def _median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else float("nan")


def _shares(rs) -> str:
    xs = [r["nodes"] for r in rs if r["nodes"] is not None]
    return f"{_pct(sum(xs) / len(xs))} / {_pct(_median(xs))}" if xs else "-"


def guarded(method, *args):
    """A method's row; one whose final model does not load or run is a failing row."""
    started = time.perf_counter()
    try:
        return method(*args)
    except Exception as exc:  # noqa: BLE001 - a conversion that fails is a result
        return {"runs": "-", "wall": time.perf_counter() - started, "nodes": None, "gemm": None,
                "status": f"fails: {(str(exc).splitlines() or [type(exc).__name__])[0][:90]}", "error": None}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _e(x) -> str:
    return "-" if x is None else f"{x:.1e}"


if __name__ == "__main__":
    sys.exit(main())
