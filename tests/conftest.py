import os

# every model here is built from a config: nothing may wait on a model hub (CI has no network)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from click.testing import CliRunner

from precisionaudit.cli import main
from precisionaudit.core.numerics import Target
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "sample_models")


def sample(name: str) -> str:
    return os.path.join(SAMPLES, name)


def findings_of(path, dtype="float16", mode="autocast", device="cuda", select=()):
    """Findings of scanning one model file with the whole catalog."""
    rules = load_rules()
    if select:
        rules = [r for r in rules if r.id in select]
    _, found = scan([path], Target(dtype, mode, device), rules)
    return found


@pytest.fixture
def gate_project(tmp_path, monkeypatch):
    """The working directory: model.py (gate_models.HAZARD, PA107 at 12:18) and clean.py."""
    from gate_models import CLEAN, HAZARD, write

    write(tmp_path, "model.py", HAZARD)
    write(tmp_path, "clean.py", CLEAN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def imported_by_a_scan(folder, *args, modules=()) -> str:
    """'EXIT [the modules of ``modules`` imported]' after ``precisionaudit scan --skip-non-models
    ARGS`` in a fresh interpreter, run in ``folder``: what a pre-commit hook's process loads."""
    import subprocess
    import sys

    code = ("import sys\nfrom precisionaudit.cli import main\n"
            "try:\n    main(['scan', '--skip-non-models', *sys.argv[2:]], prog_name='precisionaudit')\n"
            "except SystemExit as exit:\n    print(exit.code, sorted(set(sys.argv[1].split()) & set(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code, " ".join(modules), *map(str, args)], capture_output=True,
                          text=True, cwd=folder, timeout=120)
    assert done.stdout, done.stderr
    return done.stdout.splitlines()[-1]


def rule_ids(path, **kw) -> set:
    return {f.rule for f in findings_of(path, **kw)}


@pytest.fixture
def cli():
    runner = CliRunner()

    def run(*args):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    return run


def pytest_terminal_summary(terminalreporter):
    """The fuzz suite's figures (tests/fuzzing.py), when fuzz tests ran."""
    from fuzzing import TALLY

    if TALLY.cases():
        terminalreporter.write_line(TALLY.summary())


def scanned_graph(path, dtype="float16", mode="autocast", device="cuda"):
    """The analysed IR of one model file (facts the passes wrote into its nodes)."""
    results, _ = scan([path], Target(dtype, mode, device), [])
    assert results[0].status == "ok", results[0].error
    return results[0].graph
