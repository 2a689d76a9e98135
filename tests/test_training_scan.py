"""Training scripts through the scan manager (issue 23's groundwork): a Python file without
the model entry point is a training script when a training rule is selected, read by the
training stage (no torch, no child process, nothing run); a model file gets both audits.

The rule is tests/training_pack/EX401.yaml (flags calls of ``risky()``); its check is
tests/training_pack_check.py, registered by importing it.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import training_pack_check  # noqa: F401 - registers EX401's check
from gate_models import HAZARD

TESTS = os.path.dirname(os.path.abspath(__file__))
PACK = os.path.join(TESTS, "training_pack")

SCRIPT = textwrap.dedent('''\
    def risky():
        pass


    def train():
        for step in range(3):
            risky()
''')
UTILS = "def helper():\n    return 1\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose settings add the training pack: train.py (EX401 at 7:9), utils.py
    (nothing to flag) and model.py (gate_models.HAZARD, PA107, plus a risky() call at 38:5)."""
    (tmp_path / "precisionaudit.toml").write_text(f'rule-packs = ["{PACK}"]\nextend-select = ["EX4"]\n')
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "model.py").write_text(HAZARD + "\n\ndef risky():\n    pass\n\n\ndef fit():\n    risky()\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def report(cli, *args):
    result = cli("scan", *args, "--format", "json")
    return result, json.loads(result.stdout)


def places(document):
    return sorted((f["path"], f["rule"], f["line"]) for f in document["findings"])


def test_a_script_without_the_entry_point_is_read_as_a_training_script(cli, project):
    result, document = report(cli, "train.py")
    assert result.exit_code == 0, result.output  # a warning does not fail the default gate
    assert places(document) == [("train.py", "EX401", 7)]
    (model,) = document["models"]
    assert (model["entry"], model["frontend"], model["status"], model["nodes"]) == ("script", "training", "ok", 0)
    assert document["findings"][0]["message"] == "risky() is called in training code"


def test_a_model_file_gets_the_model_audit_and_the_training_audit(cli, project):
    result, document = report(cli, "model.py")
    assert result.exit_code == 1  # PA107 is an error
    rules = {(rule, line) for _, rule, line in places(document)}
    assert ("EX401", 38) in rules
    assert any(rule == "PA107" for rule, _ in rules)
    (model,) = document["models"]
    assert (model["entry"], model["frontend"]) == ("get_model", "fake")


def test_a_directory_yields_every_python_file_when_a_training_rule_is_selected(cli, project):
    _, document = report(cli, ".", "--exit-zero")
    assert [m["path"] for m in document["models"]] == ["./model.py", "./train.py", "./utils.py"]
    assert [m["frontend"] for m in document["models"]] == ["fake", "training", "training"]
    assert not [f for f in document["findings"] if f["path"] == "./utils.py"]


def test_the_text_report_says_a_script_was_read_not_run(cli, project):
    out = cli("scan", "train.py").stdout
    assert "train.py [script] (float16, autocast, cuda): read, not run (training), 1 finding" in out
    assert "hint" not in out  # no plan applies to a training script


def test_without_a_training_rule_a_plain_script_is_still_no_model(cli, project):
    result = cli("scan", "train.py", "--select", "PA1")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("precisionaudit: error: train.py: no function get_model() "
                                     "(use --entry to name the model factory)")
    skipped = cli("scan", "train.py", "--select", "PA1", "--skip-non-models")
    assert skipped.exit_code == 0
    assert "nothing to scan: 1 file without get_model() skipped" in skipped.stderr


def test_an_unparsable_script_is_its_own_error_and_the_others_are_reported(cli, project):
    (project / "broken.py").write_text("def train(:\n    risky()\n")
    result, document = report(cli, "broken.py", "train.py")
    assert result.exit_code == 2
    broken, train = document["models"]
    assert broken["status"] == "error" and broken["error"].startswith("broken.py:2:1: cannot parse")
    assert "\n" not in broken["error"]
    assert train["status"] == "ok" and places(document) == [("train.py", "EX401", 7)]
    errors = [line for line in result.stderr.splitlines() if line.startswith("precisionaudit: error:")]
    assert errors == [f"precisionaudit: error: {broken['error']}"]


def test_scanning_a_training_script_imports_no_torch_and_runs_nothing(project):
    """The CLI in a fresh interpreter where torch cannot be imported; the script would
    write a file if it ran."""
    (project / "train.py").write_text(SCRIPT + "\nopen('ran.txt', 'w').write('ran')\nrisky()\n")
    code = textwrap.dedent(f'''\
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
                return None

        sys.meta_path.insert(0, NoTorch())
        sys.path.insert(0, {TESTS!r})
        import training_pack_check
        from precisionaudit.cli import main
        try:
            main(["scan", "train.py", "--format", "json"], prog_name="precisionaudit")
        except SystemExit as exit:
            print("exit", exit.code, "torch" in sys.modules, file=sys.stderr)
        ''')
    run = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert run.stderr.strip().splitlines()[-1] == "exit 0 False", run.stderr
    assert places(json.loads(run.stdout)) == [("train.py", "EX401", 7), ("train.py", "EX401", 10)]
    assert not (project / "ran.txt").exists()


def test_a_new_kind_of_input_is_one_entry_in_the_frontend_table(cli, project, monkeypatch):
    """What a DeepSpeed/accelerate config frontend will need: a class with ``takes`` and
    ``scan``, and its suffix in ``frontend.SUFFIXES``; the directory walk, the manager and
    the reports take it unchanged."""
    from precisionaudit import frontend
    from precisionaudit.core.results import ModelResult

    class Config:
        name = "config"

        def takes(self, path, entry, rules):
            with open(path) as fh:
                return '"fp16"' in fh.read()

        def judged_target(self, target):
            return target

        def scan(self, path, target, rules, *args):
            return ModelResult(path=path, entry="config", frontend=self.name, target=target.as_dict(),
                               scopes=("training", "source")), []

    monkeypatch.setitem(frontend.SUFFIXES, ".json", (Config(),))
    (project / "ds_config.json").write_text('{"fp16": {"enabled": true}}')
    (project / "package.json").write_text("{}")
    _, document = report(cli, ".", "--exit-zero")
    assert [(m["path"], m["frontend"]) for m in document["models"]] == [
        ("./ds_config.json", "config"), ("./model.py", "fake"), ("./train.py", "training"),
        ("./utils.py", "training")]


SAMPLES = os.path.join(os.path.dirname(TESTS), "samples", "training")


def test_deepspeed_configs_are_scanned_and_other_json_files_are_not(cli, tmp_path):
    """A directory scan reads a DeepSpeed JSON config with the training rules (PA423 on its
    key) and passes over a JSON file that is no config; named, that file is one clear error."""
    with open(os.path.join(SAMPLES, "pa423_both_enabled_hazard.json")) as fh:
        (tmp_path / "ds_config.json").write_text(fh.read())
    (tmp_path / "package.json").write_text('{"name": "web", "version": "1.0.0"}\n')
    result, document = report(cli, str(tmp_path))
    assert result.exit_code == 1, result.output
    assert [m["path"] for m in document["models"]] == [str(tmp_path / "ds_config.json")]
    assert {(f["rule"], f["severity"]) for f in document["findings"]} == {("PA423", "error")}
    named = cli("scan", str(tmp_path / "package.json"))
    assert named.exit_code == 2
    assert "package.json: not a DeepSpeed or accelerate config" in named.output
    skipped = cli("scan", "--skip-non-models", str(tmp_path / "package.json"))
    assert skipped.exit_code == 0, skipped.output


def test_every_clean_training_sample_is_clean_under_every_training_rule():
    """A clean twin is written for one rule; no other rule may find anything in it either
    (PA403 once found a real fp16-without-scaler path in PA405's twin)."""
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.frontend.training import audit as audit_file

    rules = load_rules(checks=False)
    clean = sorted(f for f in os.listdir(SAMPLES) if "_clean." in f or f.endswith("_clean.py"))
    assert len(clean) >= 12
    found = {name: [(f.rule, f.line) for f in audit_file(os.path.join(SAMPLES, name), rules)] for name in clean}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_diff_shows_the_rewrites_and_fix_makes_them(cli, tmp_path):
    """--diff prints the PA409 rewrite and leaves the file as it was (exit 1); --fix writes
    it (the scan then reports what remains: nothing); a script that does not parse is left
    untouched and reported (exit 2)."""
    script = tmp_path / "train.py"
    original = "import torch\n\n\ndef step(model, x):\n    with torch.cuda.amp.autocast():  # keep\n        return model(x)\n"
    script.write_text(original)
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    diff = cli("scan", "--diff", str(script))
    assert diff.exit_code == 1
    assert '+    with torch.amp.autocast("cuda"):  # keep' in diff.output
    assert script.read_text() == original
    fixed = cli("scan", "--fix", "--format", "json", str(script), str(broken))
    assert fixed.exit_code == 2  # the broken file
    assert script.read_text() == original.replace("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")')
    assert broken.read_text() == "def f(:\n"
    document = json.loads(fixed.stdout)
    assert [f["rule"] for f in document["findings"]] == []
    assert cli("scan", "--diff", str(script)).exit_code == 0


def test_a_generated_file_is_only_syntax_checked(cli, tmp_path):
    """Over 20,000 lines a file is generated code, not a training script: no LibCST analysis
    (minutes on such a file), no finding; a syntax error in it is still one line, exit 2."""
    step = "def step_{i}(model, x):\n    with torch.autocast('cuda'):\n        loss = model(x).sum()\n    loss.backward()\n"
    generated = tmp_path / "generated.py"
    generated.write_text("import torch\n" + "".join(step.format(i=i) for i in range(5001)))
    result = cli("scan", "--format", "json", str(generated))
    assert result.exit_code == 0 and json.loads(result.stdout)["findings"] == []
    small = tmp_path / "small.py"
    small.write_text("import torch\n" + step.format(i=0))
    assert [f["rule"] for f in json.loads(cli("scan", "--format", "json", str(small)).stdout)["findings"]] == ["PA403"]
    generated.write_text(generated.read_text() + "def broken(:\n")
    broken = cli("scan", str(generated))
    assert broken.exit_code == 2 and "generated.py:20006:" in broken.output
