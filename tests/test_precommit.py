"""The pre-commit hook, run for real with `pre-commit try-repo`, and the torch-free skip path.

The test drives the `precisionaudit-system` hook: it runs the precisionaudit on PATH, here
the one installed (editable) in the test's own environment, so it checks this working tree.
The `precisionaudit` (language: python) hook would have pre-commit pip-install the project,
torch included (GBs), into a fresh hook environment: too slow and network-bound for a unit
test; its manifest entry is checked to run the same command over the same files instead.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from gate_models import CLEAN, HAZARD, NOT_A_MODEL, write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, ".pre-commit-hooks.yaml")
BIN = os.path.dirname(sys.executable)
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})


def _hooks():
    with open(MANIFEST) as fh:
        return {h["id"]: h for h in yaml.safe_load(fh)}


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """(hook repo holding only the committed manifest, project repo with three files)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    hook_repo = tmp_path_factory.mktemp("hook_repo")
    shutil.copy(MANIFEST, hook_repo / ".pre-commit-hooks.yaml")
    _git(hook_repo, "init", "-q")
    _git(hook_repo, "add", ".pre-commit-hooks.yaml")
    _git(hook_repo, "commit", "-q", "-m", "hooks")
    project = tmp_path_factory.mktemp("project")
    write(project, "hazard_model.py", HAZARD)
    write(project, "clean_model.py", CLEAN)
    write(project, "utils.py", NOT_A_MODEL)
    write(project, "precisionaudit.toml", "")  # stops the upward settings search here
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "models")
    return hook_repo, project


def _try_repo(repos, *files):
    hook_repo, project = repos
    pre_commit = shutil.which("pre-commit", path=BIN) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
           "PRE_COMMIT_HOME": str(project.parent / "pre-commit-home")}
    return subprocess.run(
        [pre_commit, "try-repo", str(hook_repo), "precisionaudit-system", "--files", *files],
        cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_hook_fails_on_the_hazard_and_names_rule_and_line(repos):
    run = _try_repo(repos, "hazard_model.py", "utils.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"hazard_model\.py:12:18: PA107 \[error\]", run.stdout), run.stdout


def test_hook_passes_on_the_clean_twin_and_skips_non_models(repos):
    run = _try_repo(repos, "clean_model.py", "utils.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


def test_both_hooks_run_one_process_over_model_and_onnx_files():
    hooks = _hooks()
    assert set(hooks) == {"precisionaudit", "precisionaudit-system"}
    assert hooks["precisionaudit"]["language"] == "python"
    assert hooks["precisionaudit-system"]["language"] == "system"
    for hook in hooks.values():
        assert hook["entry"] == "precisionaudit scan --skip-non-models"
        assert hook["require_serial"] is True  # one process: torch imported once
        pattern = re.compile(hook["files"])
        assert pattern.search("models/gpt.py") and pattern.search("export/model.onnx")
        assert not pattern.search("README.md") and not pattern.search("model.pyc")


def _scan_in_subprocess(tmp_path, *names):
    """Exit code and whether torch got imported, for `precisionaudit scan NAMES`."""
    code = ("import sys\nfrom precisionaudit.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', code)\n")
    run = subprocess.run([sys.executable, "-c", code, "scan", "--isolated", "--skip-non-models", *names],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return run.stdout.strip().splitlines()[-1], run.stderr


def test_non_model_files_are_read_as_training_scripts_without_importing_torch(tmp_path):
    write(tmp_path, "utils.py", NOT_A_MODEL)
    write(tmp_path, "notes.py", "# mentions get_model but never defines it\n")
    last, stderr = _scan_in_subprocess(tmp_path, "utils.py", "notes.py")
    assert last == "no torch 0"
    assert "nothing to scan" not in stderr  # the bundled training rules read them


def test_non_model_files_no_selected_rule_reads_are_skipped_without_importing_torch(tmp_path):
    write(tmp_path, "utils.py", NOT_A_MODEL)
    write(tmp_path, "notes.py", "# mentions get_model but never defines it\n")
    last, stderr = _scan_in_subprocess(tmp_path, "--select", "PA1", "utils.py", "notes.py")
    assert last == "no torch 0"
    assert "nothing to scan: 2 files without get_model() skipped" in stderr


def test_a_directory_without_files_a_selected_rule_reads_is_still_a_usage_error(tmp_path, cli, monkeypatch):
    (tmp_path / "pkg").mkdir()
    write(tmp_path / "pkg", "utils.py", NOT_A_MODEL)
    monkeypatch.chdir(tmp_path)
    result = cli("scan", "--isolated", "pkg", "--select", "PA1")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "precisionaudit: error: pkg: no model files (Python files defining get_model() or .onnx files)"]
    as_script = cli("scan", "--isolated", "pkg", "--format", "json")  # the training rules read it
    assert as_script.exit_code == 0
    assert [(m["path"], m["frontend"]) for m in json.loads(as_script.stdout)["models"]] == [
        (os.path.join("pkg", "utils.py"), "training")]


def test_documented_snippets_name_the_hooks_of_the_manifest():
    with open(os.path.join(ROOT, "docs", "ci-and-pre-commit.md")) as fh:
        section = fh.read()
    snippets = [yaml.safe_load(block.split("```", 1)[0]) for block in section.split("```yaml\n")[1:]]
    named = {hook["id"] for s in snippets if "repos" in s for repo in s["repos"] for hook in repo["hooks"]}
    assert named == set(_hooks())
    (workflow,) = [s for s in snippets if "jobs" in s]
    steps = workflow["jobs"]["precisionaudit"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    scan = next(s for s in steps if "--format sarif" in s.get("run", ""))
    assert upload["with"]["sarif_file"] in scan["run"] and upload["if"] == "always()"
