"""Keras 3 applications (random weights) scanned on Keras's torch backend: the warning-or-above
findings under mixed_float16 and mixed_bfloat16, and the scan's time against its floor,
keras imported plus three forwards of the same model (real tensors, CPU, same policy).

    python bench/keras_bench.py [--archs ResNet50,...] [--policies mixed_float16,...] [--repeat 3]
                                [--no-timing]

Each run is a fresh process (python -m precisionaudit scan FILE --format json); times are
wall-clock medians of --repeat runs. Needs keras (pip install 'precisionaudit[keras]').
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

ARCHS = ("ResNet50", "EfficientNetB0", "MobileNetV3Small", "ConvNeXtTiny")
POLICIES = ("mixed_float16", "mixed_bfloat16")

MODEL_FILE = '''import keras
import numpy as np


def get_model():
    keras.mixed_precision.set_global_policy("{policy}")
    return keras.applications.{arch}(weights=None)


def get_example_inputs():
    return (np.zeros((1, 224, 224, 3), "float32"),)
'''

FORWARDS = '''import os
os.environ["KERAS_BACKEND"] = "torch"
import keras, numpy as np, torch
keras.mixed_precision.set_global_policy("{policy}")
model = keras.applications.{arch}(weights=None)
x = np.zeros((1, 224, 224, 3), "float32")
with torch.no_grad():
    for _ in range(3):
        model(x, training=False)
'''


def timed(cmd) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": "torch"})
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-timing", action="store_true", help="scan once each, no floor")
    args = ap.parse_args()
    rows, times = [], []
    with tempfile.TemporaryDirectory(prefix="keras-bench-") as tmp:
        for arch in args.archs.split(","):
            for policy in args.policies.split(","):
                path = os.path.join(tmp, f"{arch}_{policy}.py")
                with open(path, "w") as fh:
                    fh.write(MODEL_FILE.format(arch=arch, policy=policy))
                repeat = 1 if args.no_timing else args.repeat
                scans = []
                for _ in range(repeat):
                    seconds, out = timed([sys.executable, "-m", "precisionaudit", "scan", path, "--format", "json",
                                          "--exit-zero", "--fail-on", "error"])
                    if out.returncode != 0:
                        sys.exit(f"{arch} {policy}: scan failed: {out.stderr.strip()[-500:]}")
                    scans.append(seconds)
                report = json.loads(out.stdout)
                model = report["models"][0]
                found = [f for f in report["findings"] if f["severity"] in ("error", "warning")]
                print(f"{arch} {policy}: {model.get('nodes')} ops ({model.get('frontend')}), "
                      f"{len(report['findings'])} findings, {len(found)} warning or above", flush=True)
                for f in found:
                    rows.append((arch, policy, f["rule"], f["severity"], f["module"], f["op"], f["message"]))
                    print(f"  {f['rule']} [{f['severity']}] {f['module']} · {f['op']}: {f['message']}", flush=True)
                if not args.no_timing:
                    floor = [timed([sys.executable, "-c", FORWARDS.format(arch=arch, policy=policy)])[0]
                             for _ in range(repeat)]
                    times.append((arch, policy, statistics.median(scans), statistics.median(floor)))
                    print(f"  scan {times[-1][2]:.1f} s, keras import + 3 forwards {times[-1][3]:.1f} s, "
                          f"ratio {times[-1][2] / times[-1][3]:.2f}", flush=True)
    if times:
        print("\n| model | policy | scan (s) | import + 3 forwards (s) | ratio |\n|---|---|---:|---:|---:|")
        for arch, policy, scan, floor in times:
            print(f"| {arch} | {policy} | {scan:.1f} | {floor:.1f} | {scan / floor:.2f} |")


if __name__ == "__main__":
    main()
