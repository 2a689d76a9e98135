"""Rerunning a test file under each of CPU's kernel paths: torch picks its vectorised kernels
(and its fp32 math functions) by instruction set at start-up; a process started with
``ATEN_CPU_CAPABILITY`` set runs another path, so this machine also covers the machines that
have only that one. A test module calls ``rerun_test`` from a test named ``*kernel_path*``."""
import os
import subprocess
import sys

import torch

ORDER = ["DEFAULT", "AVX2", "AVX512"]


def other_kernel_paths() -> list[str]:
    """The ``ATEN_CPU_CAPABILITY`` values this CPU supports besides the one torch picked."""
    natural = torch.backends.cpu.get_cpu_capability()
    below = ORDER[:ORDER.index(natural)] if natural in ORDER else ["DEFAULT"]
    return [path.lower() for path in below]


def rerun_test(test_file: str, path: str) -> None:
    """Run ``test_file``'s other tests in a fresh interpreter under kernel ``path``; fail with
    their output if any fails."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=path)
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert probe.stdout.strip() == path.upper(), probe.stderr
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_file,
                           "-k", "not kernel_path"], env=env, capture_output=True, text=True, timeout=1200,
                          cwd=os.path.dirname(test_file))
    assert done.returncode == 0, done.stdout[-4000:]
