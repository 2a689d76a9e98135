"""rules/catalog_cache.py: the bundled rule pack's parsed YAML kept beside its bytecode. A kept
copy must give what parsing gives, be used only while every rule file is as it was, and never
make a command fail: a copy that cannot be read is parsed again, a place that cannot be
written is left unwritten, and none is written where Python writes no bytecode."""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from precisionaudit.rules import catalog_cache
from precisionaudit.rules.catalog_cache import kept_documents

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rules")


@pytest.fixture
def pack(tmp_path, monkeypatch):
    """Three of the bundled rule files in a folder of their own, bytecode written under a
    prefix in tmp_path."""
    directory = tmp_path / "pack"
    directory.mkdir()
    for name in ("PA101.yaml", "PA401.yaml", "PA701.yaml"):
        shutil.copy(os.path.join(RULES, name), directory)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return directory


def read(directory, parsed: list):
    names = sorted(os.listdir(directory))

    def parse():
        parsed.append(1)
        return [(name, yaml.safe_load(open(os.path.join(directory, name)))) for name in names]

    return kept_documents(str(directory), names, parse)


def test_a_kept_copy_gives_what_parsing_gives_until_a_file_changes(pack):
    parsed = []
    first = read(pack, parsed)
    assert [name for name, _ in first] == ["PA101.yaml", "PA401.yaml", "PA701.yaml"]
    assert first[1][1] == yaml.safe_load(open(pack / "PA401.yaml")) and first[1][1]["id"] == "PA401"
    assert read(pack, parsed) == first and len(parsed) == 1
    (pack / "PA401.yaml").write_text((pack / "PA401.yaml").read_text() + "# edited\n")
    assert read(pack, parsed) == first and len(parsed) == 2  # the same rules, read again
    os.utime(pack / "PA101.yaml", ns=(1, 1))
    read(pack, parsed)
    assert len(parsed) == 3


@pytest.mark.parametrize("damage", [b"", b"\0\1\2", b"not marshal at all"])
def test_a_kept_copy_that_cannot_be_read_is_parsed_again(pack, damage):
    parsed = []
    first = read(pack, parsed)
    kept = catalog_cache._kept_path(str(pack))
    with open(kept, "wb") as fh:
        fh.write(damage)
    assert read(pack, parsed) == first and len(parsed) == 2
    assert read(pack, parsed) == first and len(parsed) == 2  # written again


def test_none_is_written_where_python_writes_no_bytecode_or_cannot_write(pack, tmp_path, monkeypatch):
    parsed = []
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    read(pack, parsed)
    read(pack, parsed)
    assert len(parsed) == 2 and not os.path.exists(tmp_path / "pycache")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "pycache").write_text("a file where the folder would go")
    assert read(pack, parsed) == read(pack, parsed) and len(parsed) == 4


def test_the_kept_copy_lives_under_the_bytecode_prefix(pack, tmp_path):
    read(pack, [])
    kept = catalog_cache._kept_path(str(pack))
    assert kept.startswith(str(tmp_path / "pycache")) and os.path.isfile(kept)
    assert sorted(os.listdir(pack)) == ["PA101.yaml", "PA401.yaml", "PA701.yaml"]  # nothing beside the YAML


def test_a_second_command_reads_the_catalog_without_pyyaml(tmp_path):
    """What the kept copy is for: a command reads the catalog without importing PyYAML."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    code = ("import sys\nfrom precisionaudit.rules.engine import load_rules\n"
            "rules = load_rules(checks=False)\n"
            "print(len(rules), sorted(r.id for r in rules)[-1], 'yaml' in sys.modules)\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    count = len([f for f in os.listdir(RULES) if f.endswith(".yaml")])
    assert [r.stdout.split()[0] for r in runs] == [str(count)] * 2, runs[0].stderr
    assert [r.stdout.split()[2] for r in runs] == ["True", "False"]
    assert runs[0].stdout.split()[1] == runs[1].stdout.split()[1]
