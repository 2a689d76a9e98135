"""The content-hash cache of training scripts' findings (training/cache.py, settings key
``cache-dir``): an unchanged file costs a hash, anything its findings depend on (the text,
the rules and their wording, the path) changes the key, and a cache that is corrupt or
cannot be written is a miss, never an error."""
import json
import os

import pytest
from training_rules import TRAINING_RULES, sample, write

from precisionaudit.core.errors import UsageError
from precisionaudit.training import audit as audit_module
from precisionaudit.training.audit import audit_script
from precisionaudit.training.cache import Cache

HAZARD = sample("pa401_clip_before_unscale_hazard.py")


def entries(directory) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(directory) for f in fs if f.endswith(".json"))


def test_a_warm_entry_gives_the_same_findings_without_reading_the_script_again(tmp_path, monkeypatch):
    cache = Cache(str(tmp_path / "cache"))
    cold = audit_script(HAZARD, TRAINING_RULES, cache)
    assert [f.rule for f in cold] == ["PA401"] and len(entries(tmp_path / "cache")) == 1
    monkeypatch.setattr(audit_module, "_audit_text", lambda *a: pytest.fail("analysed again"))
    warm = audit_script(HAZARD, TRAINING_RULES, cache)
    assert [f.to_json() for f in warm] == [f.to_json() for f in cold]


def test_the_key_changes_with_the_text_the_rules_their_wording_and_the_path(tmp_path):
    cache = Cache(str(tmp_path))
    text = open(HAZARD, encoding="utf-8").read()
    pa401 = [r for r in TRAINING_RULES if r.id == "PA401"]
    keys = {cache.key(HAZARD, text, TRAINING_RULES), cache.key(HAZARD, text + "\n", TRAINING_RULES),
            cache.key(HAZARD, text, pa401), cache.key("./" + HAZARD, text, TRAINING_RULES)}
    reworded = [type(r)(**{**r.__dict__, "message": r.message + "!"}) for r in pa401]
    keys.add(cache.key(HAZARD, text, reworded))
    assert len(keys) == 5
    assert cache.key(HAZARD, text, TRAINING_RULES) == Cache(str(tmp_path / "elsewhere")).key(HAZARD, text, TRAINING_RULES)


def test_an_edited_file_is_read_again(tmp_path):
    cache = Cache(str(tmp_path / "cache"))
    path = write(tmp_path, open(HAZARD, encoding="utf-8").read())
    assert [f.rule for f in audit_script(str(path), TRAINING_RULES, cache)] == ["PA401"]
    path.write_text(path.read_text().replace("torch.nn.utils.clip_grad_norm_(", "scaler.unscale_(optimizer)\n"
                                             "        torch.nn.utils.clip_grad_norm_("))
    assert audit_script(str(path), TRAINING_RULES, cache) == []
    assert len(entries(tmp_path / "cache")) == 2


@pytest.mark.parametrize("damage", ["", "{", "[]", '{"findings": [{"rule": 1}]}', '{"findings": 3}', "\0\0"])
def test_a_corrupt_entry_is_a_miss_and_is_written_again(tmp_path, damage):
    cache = Cache(str(tmp_path / "cache"))
    expected = [f.to_json() for f in audit_script(HAZARD, TRAINING_RULES, cache)]
    (entry,) = entries(tmp_path / "cache")
    with open(entry, "w", encoding="utf-8") as fh:
        fh.write(damage)
    assert [f.to_json() for f in audit_script(HAZARD, TRAINING_RULES, cache)] == expected
    assert json.load(open(entry, encoding="utf-8"))["findings"] == expected


def test_a_file_that_does_not_parse_is_remembered_as_its_error(tmp_path):
    cache = Cache(str(tmp_path / "cache"))
    path = write(tmp_path, "import torch\nscaler.scale(loss).backward()\nif x\n", "broken.py")
    for _ in range(2):
        with pytest.raises(UsageError, match=r"broken.py:3:\d+: cannot parse"):
            audit_script(str(path), TRAINING_RULES, cache)
    assert len(entries(tmp_path / "cache")) == 1


def test_a_directory_that_cannot_be_written_leaves_the_scan_uncached(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    cache = Cache(str(blocked / "cache"))
    assert [f.rule for f in audit_script(HAZARD, TRAINING_RULES, cache)] == ["PA401"]


def test_writes_leave_no_temporary_files_and_mark_the_directory_as_a_cache(tmp_path):
    root = tmp_path / "cache"
    audit_script(HAZARD, TRAINING_RULES, Cache(str(root)))
    names = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    assert len(names) == 3 and {".gitignore", "CACHEDIR.TAG"} < set(names)
    assert [n for n in names if n.endswith(".json")] == [n for n in names if not n.startswith(("CACHEDIR", ".git"))]
    assert (root / ".gitignore").read_text().splitlines()[-1] == "*"


def scan(cli, *args):
    return cli("scan", "--select", "PA4", "--format", "json", "--exit-zero", *args)


def test_the_cache_lives_beside_the_settings_file_and_the_settings_move_or_disable_it(tmp_path, monkeypatch):
    """The default is .precisionaudit_cache beside the settings file (ruff's .ruff_cache);
    ``cache-dir`` moves it (relative to the settings file) or, ``false``, turns it off."""
    from click.testing import CliRunner

    from precisionaudit.cli import main

    def cli(*args):
        result = CliRunner().invoke(main, list(args))
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    write(project / "src", open(HAZARD, encoding="utf-8").read())
    monkeypatch.chdir(tmp_path)
    settings = project / "pyproject.toml"
    settings.write_text("[tool.precisionaudit]\n")
    first = scan(cli, str(project / "src"))
    assert [f["rule"] for f in first["findings"]] == ["PA401"]
    assert len(entries(project / ".precisionaudit_cache")) == 1
    assert [f["message"] for f in scan(cli, str(project / "src"))["findings"]] == \
        [f["message"] for f in first["findings"]]
    settings.write_text('[tool.precisionaudit]\ncache-dir = "build/lint-cache"\n')
    scan(cli, str(project / "src"))
    assert len(entries(project / "build" / "lint-cache")) == 1
    settings.write_text("[tool.precisionaudit]\ncache-dir = false\n")
    (project / "src" / "train.py").write_text(open(HAZARD, encoding="utf-8").read() + "\n# edited\n")
    scan(cli, str(project / "src"))
    assert len(entries(project / ".precisionaudit_cache")) == 1 and len(entries(project / "build")) == 1


def test_cache_dir_true_is_refused_in_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from precisionaudit.cli import main

    (tmp_path / "pyproject.toml").write_text("[tool.precisionaudit]\ncache-dir = true\n")
    write(tmp_path, "x = 1\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["scan", "--select", "PA4", "train.py"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "precisionaudit: error: pyproject.toml: tool.precisionaudit.cache-dir: expected a directory or false, got true")
