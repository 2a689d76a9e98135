"""Run the test suite (and the zoo) on the newest releases: what moved since constraints.txt, what broke.

    python bench/upstream.py                  # fresh venv in a temp dir: newest releases, then the suite
    python bench/upstream.py --zoo            # + bench/zoo_bench.py --verdicts (installs the newest diffusers)
    python bench/upstream.py --venv /tmp/up   # the venv in that folder (kept; upgraded if it exists)
    python bench/upstream.py --dry-run        # print the plan and the pins; install and run nothing

A manual or scheduled check, not part of the test suite or CI. constraints.txt holds the versions
the suite was judged with; this installs ``torch==TORCH`` (held: the build is a choice, not a
release to follow), then ``pip install -e ".[test,onnx,html]" --upgrade --upgrade-strategy eager``
without constraints.txt and without pip's cache, and prints every pinned package whose installed
version differs from its pin. Then it runs ``python -m pytest -q`` in that venv (and the zoo with
``--zoo``) and lists the failing tests and the zoo sites to judge again (code changed, judged
nowhere, judged false, scan errors). Exit status 0 only when nothing failed and no site needs
judging; 1 otherwise, with the list.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from packaging.version import InvalidVersion, Version

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONSTRAINTS = os.path.join(ROOT, "constraints.txt")
VERDICTS = os.path.join(HERE, "zoo", "verdicts.md")
EXTRAS = ".[test,onnx,html]"


def canonical(name: str) -> str:
    """A package name as pip compares them (PEP 503): ``Jinja2``, ``jinja_2`` → ``jinja2``, ``jinja-2``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(text: str) -> dict:
    """``name == version`` pins of a constraints file's text: {name as written: version}.
    Comments, blank lines and anything that is not an exact pin (``>=``, URLs, options) are skipped."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*(\S+)", line)
        if match:
            pins[match.group(1)] = match.group(2)
    return pins


def same_version(pinned: str, installed: str) -> bool:
    """Whether an installed version is the pinned release (``2.13.0+cpu`` is ``2.13.0``, ``1.0`` is
    ``1.0.0``), as PEP 440 compares them."""
    try:
        return Version(Version(pinned).public) == Version(Version(installed).public)
    except InvalidVersion:
        return pinned.strip() == installed.strip()


def moved(pins: dict, installed: dict) -> list:
    """(name, pinned, installed) of every pin the installed versions differ from, in pin order;
    ``installed`` maps names (any spelling) to versions; a pin not installed reads "not installed"."""
    by_name = {canonical(name): version for name, version in installed.items()}
    rows = []
    for name, pinned in pins.items():
        now = by_name.get(canonical(name))
        if now is None or not same_version(pinned, now):
            rows.append((name, pinned, now or "not installed"))
    return rows


def failing_tests(lines) -> list:
    """The ``FAILED``/``ERROR`` lines of pytest's short summary (``-rfE``)."""
    return [line.strip() for line in lines if re.match(r"(FAILED|ERROR) ", line)]


def sites_to_judge(lines) -> list:
    """The zoo sites ``zoo_bench.py --verdicts`` lists as not judged true, and its scan errors."""
    marks = ("judge it again", "judged nowhere", "judged false")
    return [line.strip() for line in lines
            if (line.startswith("  ") and any(m in line for m in marks)) or line.startswith("scan errors:")]


def run(cmd, env=None) -> tuple:
    """Run ``cmd`` in the checkout, its output streamed; (exit status, output lines)."""
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        print(line, end="", flush=True)
    return proc.wait(), lines


def plan(args, venv: str) -> list:
    """The commands that build the venv, in order."""
    python = os.path.join(venv, "bin", "python")
    index = ["--extra-index-url", args.torch_index_url] if args.torch_index_url else []
    hold = os.path.join(venv, "hold-torch.txt")  # torch stays at --torch; everything else floats
    return [
        [sys.executable, "-m", "venv", venv],
        [python, "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [python, "-m", "pip", "install", "-q", f"torch=={args.torch}", *index],
        [python, "-m", "pip", "install", "-q", "--upgrade", "--upgrade-strategy", "eager", "-e", EXTRAS,
         *(["diffusers"] if args.zoo else []), "-c", hold, *index],
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:6]))
    parser.add_argument("--venv", help="build the venv here (kept) instead of in a temporary folder")
    parser.add_argument("--torch", default="2.13.0", help="the torch version installed and held (default 2.13.0)")
    parser.add_argument("--torch-index-url", help="where torch comes from (e.g. https://download.pytorch.org/whl/cpu)")
    parser.add_argument("--zoo", action="store_true", help="also run bench/zoo_bench.py --verdicts")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the pins; install nothing")
    args = parser.parse_args(argv)
    with open(CONSTRAINTS, encoding="utf-8") as f:
        pins = read_pins(f.read())
    if args.dry_run:
        for cmd in plan(args, args.venv or "VENV"):
            print("would run: " + " ".join(cmd))
        print("then: python -m pytest -q -rfE" + (f"; python bench/zoo_bench.py --verdicts {VERDICTS}" if args.zoo else ""))
        print(f"{len(pins)} pins in {CONSTRAINTS} to compare with")
        return 0
    with tempfile.TemporaryDirectory(prefix="upstream-") as tmp:
        return check(args, pins, os.path.abspath(args.venv) if args.venv else os.path.join(tmp, "venv"))


def check(args, pins: dict, venv: str) -> int:
    env = dict(os.environ, PIP_NO_CACHE_DIR="1")
    env.pop("PIP_CONSTRAINT", None)  # newest releases: no constraints from the environment either
    os.makedirs(venv, exist_ok=True)
    with open(os.path.join(venv, "hold-torch.txt"), "w", encoding="utf-8") as f:
        f.write(f"torch=={args.torch}\n")
    for cmd in plan(args, venv):
        status, lines = run(cmd, env)
        if status:
            print(f"\nFAILED: install step exited {status}: {' '.join(cmd)}")
            return 1
    python = os.path.join(venv, "bin", "python")
    listing = subprocess.run([python, "-m", "pip", "list", "--format=json", "--exclude-editable"],
                             env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
    installed = {p["name"]: p["version"] for p in json.loads(listing)}
    rows = moved(pins, installed)
    print(f"\n{len(rows)} of {len(pins)} pinned packages moved (constraints.txt → newest here):")
    print("| package | pinned | newest |\n|---|---|---|")
    for name, pinned, now in rows:
        print(f"| {name} | {pinned} | {now} |")
    if args.zoo:
        print(f"diffusers (not pinned; verdicts.md names the version it was judged with): "
              f"{installed.get('diffusers', 'not installed')}")
    problems = []
    status, lines = run([python, "-m", "pytest", "-q", "-rfE"], env)
    failed = failing_tests(lines)
    problems += failed or ([f"pytest exited {status}"] if status else [])
    if args.zoo:
        status, lines = run([python, os.path.join(HERE, "zoo_bench.py"), "--verdicts", VERDICTS], env)
        sites = sites_to_judge(lines)
        problems += sites or ([f"zoo_bench.py exited {status}"] if status else [])
    print()
    if problems:
        print(f"FAILED: {len(failed)} failing tests" + (f", {len(sites)} zoo sites to judge again" if args.zoo else ""))
        print("\n".join("  " + p for p in problems))
        return 1
    print("OK: the suite passed" + (" and every zoo site is judged true" if args.zoo else "") + " on these releases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
