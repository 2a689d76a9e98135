"""Model files where real repositories keep them: inside their own package (flat, src layout,
namespace package), beside library helpers that are also called ``get_model``.

A model file imports as pytest imports a test module (the first directory upwards without
``__init__.py`` goes on ``sys.path``), and is a model file only when its module level defines
``get_model`` callable without arguments (read with ast, never imported). Every layout here is
written to a temporary directory and scanned through the command line.
"""
import json
import os

import pytest
from gate_models import write

from precisionaudit.frontend.python_file import read_python

LAYER = """
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 32)

    def forward(self, x):
        return torch.softmax(self.lin(x), dim=-1)
"""


def model(import_line: str) -> str:
    return f"""
import torch
{import_line}


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 16),)
"""


#: a library helper of the same name whose import leaves a marker: it must never be imported
HELPER = """
import pathlib

pathlib.Path(__file__).with_name("{marker}").write_text("imported")


{body}
"""
#: mmengine/hub/hub.py
MMENGINE = "def get_model(cfg_path: str, pretrained: bool = False, **kwargs):\n    return None\n"
#: detectron2 projects/DensePose/tests/common.py
DENSEPOSE = "def get_model(config_file):\n    return None\n"
#: pytorch/examples distributed/rpc/batch/parameter_server.py
RPC_SERVER = ("class BatchUpdateParameterServer(object):\n    def __init__(self):\n        self.model = None\n\n"
              "    def get_model(self):\n        return self.model\n")


def package(root, name="mypkg", under="", namespace=False, import_line=None) -> str:
    """``root/under/name/{layers.py, models/tiny.py}``: a package whose model file imports it."""
    base = os.path.join(under, name)
    if not namespace:
        write(root, os.path.join(base, "__init__.py"), "")
        write(root, os.path.join(base, "models", "__init__.py"), "")
    write(root, os.path.join(base, "layers.py"), LAYER)
    return write(root, os.path.join(base, "models", "tiny.py"),
                 model(import_line or f"from {name}.layers import Block"))


def scanned(cli, *args):
    """(exit code, the JSON report's models, stderr) of ``scan --format json``."""
    result = cli("scan", *args, "--format", "json")
    models = json.loads(result.stdout)["models"] if result.stdout.strip() else []
    return result.exit_code, models, result.stderr


def assert_captured(models, path_end: str):
    found = [m for m in models if m["path"].endswith(path_end)]
    assert len(found) == 1, models
    assert (found[0]["status"], found[0]["frontend"], found[0]["entry"]) == ("ok", "fake", "get_model"), found[0]
    assert found[0]["nodes"] >= 2  # the Linear and the softmax: the model really ran


# --------------------------------------------------------------------------- imports
@pytest.mark.parametrize("absolute", [False, True], ids=["relative path", "absolute path"])
def test_a_model_file_imports_its_own_package(cli, tmp_path, monkeypatch, absolute):
    path = package(tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo" if not absolute else tmp_path)
    named = path if absolute else os.path.join("mypkg", "models", "tiny.py")
    code, models, err = scanned(cli, named)
    assert code in (0, 1), err
    assert_captured(models, "tiny.py")


def test_a_model_file_in_a_package_imports_relatively(cli, tmp_path, monkeypatch):
    path = package(tmp_path / "repo", import_line="from ..layers import Block")
    monkeypatch.chdir(tmp_path)
    code, models, err = scanned(cli, path)
    assert code in (0, 1), err
    assert_captured(models, "tiny.py")


def test_a_src_layout_imports_its_package(cli, tmp_path, monkeypatch):
    package(tmp_path / "repo", under="src")
    monkeypatch.chdir(tmp_path / "repo")
    code, models, err = scanned(cli, os.path.join("src", "mypkg", "models", "tiny.py"))
    assert code in (0, 1), err
    assert_captured(models, "tiny.py")


def test_a_namespace_package_needs_its_root_named(cli, tmp_path, monkeypatch):
    """Without __init__.py files the rootdir-style base is the model's own directory (as in
    pytest): the one-line error says where it searched and names --pythonpath; with
    --pythonpath, or the settings' pythonpath, it scans."""
    repo = tmp_path / "repo"
    path = package(repo, name="nspkg", namespace=True)
    monkeypatch.chdir(tmp_path)
    result = cli("scan", path)
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines)) == (2, 1), result.stderr
    assert "No module named 'nspkg'" in lines[0] and "--pythonpath" in lines[0]
    assert f"searched {os.path.dirname(path)}" in lines[0]

    code, models, err = scanned(cli, path, "--pythonpath", str(repo))
    assert code in (0, 1), err
    assert_captured(models, "tiny.py")

    (repo / "precisionaudit.toml").write_text('pythonpath = ["."]\n')
    code, models, err = scanned(cli, path)
    assert code in (0, 1), err
    assert_captured(models, "tiny.py")


def test_a_missing_pythonpath_directory_is_one_line(cli, tmp_path):
    (tmp_path / "precisionaudit.toml").write_text('pythonpath = ["nowhere"]\n')
    path = write(tmp_path, "m.py", model("from torch.nn import Linear as Block"))
    result = cli("scan", path)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"precisionaudit: error: {tmp_path / 'precisionaudit.toml'}: pythonpath[0]: "
                                     f"no such directory: {tmp_path / 'nowhere'}")


def test_two_projects_with_the_same_package_name_scan_in_one_process(cli, tmp_path):
    """The Python API and the tests run models in-process: the first project's ``mypkg`` is
    forgotten after its scan, so the second imports its own (whose Linear(16, 30) is not
    Tensor Core aligned: PA201)."""
    first = package(tmp_path / "one")
    second = package(tmp_path / "two")
    write(tmp_path / "two", "mypkg/layers.py", LAYER.replace("Linear(16, 32)", "Linear(16, 30)"))
    unaligned = []
    for path in (first, second, first):
        result = cli("scan", path, "--format", "json", "--exit-zero", "--select", "PA201")
        assert result.exit_code == 0, result.stderr
        unaligned.append([f["module"] for f in json.loads(result.stdout)["findings"]])
    assert unaligned == [[], ["lin"], []]


# --------------------------------------------------------------------------- what a model file is
def test_helpers_named_get_model_are_never_imported(cli, tmp_path, monkeypatch):
    """A folder scan over a repository whose helpers are called get_model: the helpers are
    training scripts (read, not run) or nothing, the scan exits 0 or 1, no marker appears,
    and the real model file beside them is still scanned."""
    repo = tmp_path / "repo"
    package(repo)
    write(repo, "mypkg/hub.py", HELPER.format(marker="HUB_IMPORTED", body=MMENGINE))
    write(repo, "mypkg/common.py", HELPER.format(marker="COMMON_IMPORTED", body=DENSEPOSE))
    write(repo, "mypkg/server.py", HELPER.format(marker="SERVER_IMPORTED", body=RPC_SERVER))
    monkeypatch.chdir(repo)
    for select in ((), ("--select", "PA1")):  # with the training rules, and with model rules only
        code, models, err = scanned(cli, "mypkg", *select)
        assert code in (0, 1), err
        assert_captured(models, "tiny.py")
        helpers = {os.path.basename(m["path"]): m["frontend"] for m in models
                   if not m["path"].endswith(("tiny.py", "layers.py", "__init__.py"))}
        assert helpers == ({} if select else {"hub.py": "training", "common.py": "training",
                                               "server.py": "training"})
    assert not [f for f in os.listdir(repo / "mypkg") if f.endswith("_IMPORTED")]


@pytest.mark.parametrize("body,reason", [
    (MMENGINE, "get_model(cfg_path: str, pretrained: bool=False, **kwargs) needs arguments"),
    (DENSEPOSE, "get_model(config_file) needs arguments"),
    (RPC_SERVER, "get_model() is a method of class BatchUpdateParameterServer"),
])
@pytest.mark.parametrize("command", ["scan", "explain", "plan", "check"])
def test_a_helper_named_explicitly_is_one_line_and_not_imported(cli, tmp_path, body, reason, command):
    path = write(tmp_path, "helper.py", HELPER.format(marker="IMPORTED", body=body))
    result = cli(command, path, *(("--select", "PA1") if command == "scan" else ()))
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines), result.stdout) == (2, 1, "")
    assert lines[0].startswith(f"precisionaudit: error: {path}:") and reason in lines[0], lines[0]
    assert "--entry" in lines[0]
    assert not (tmp_path / "IMPORTED").exists()


def test_a_helper_passed_by_pre_commit_is_skipped(cli, tmp_path):
    path = write(tmp_path, "hub.py", HELPER.format(marker="IMPORTED", body=MMENGINE))
    result = cli("scan", path, "--select", "PA1", "--skip-non-models")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "IMPORTED").exists()


@pytest.mark.parametrize("source,is_model", [
    ("def get_model():\n    pass\n", True),
    ("def get_model(pretrained=False, *, size=16, **kwargs):\n    pass\n", True),
    ("def get_model(*args):\n    pass\n", True),
    ("import functools\nget_model = functools.partial(dict, a=1)\n", True),
    ("from typing import Callable\nget_model: Callable = dict\n", True),
    ("try:\n    import x\nexcept ImportError:\n    def get_model():\n        pass\n", True),
    ("if True:\n    def get_model():\n        pass\n", True),
    (MMENGINE, False),
    (DENSEPOSE, False),
    (RPC_SERVER, False),
    ("def get_model(*, size):\n    pass\n", False),  # a required keyword-only parameter
    ("def get_model(a, /):\n    pass\n", False),  # a required positional-only parameter
    ("async def get_model():\n    pass\n", False),
    ("def build():\n    def get_model():\n        pass\n    return get_model\n", False),  # nested
    ("from mmengine.hub import get_model\n", False),  # imported, as scripts that use the helper do
    ("get_model_config = dict\n# def get_model():\n", False),  # a comment is no definition
    ("def get_model():\n    pass\n\n\ndef get_model(config):\n    pass\n", False),  # the last binding decides
])
def test_a_model_file_is_decided_from_its_module_level(tmp_path, source, is_model):
    path = write(tmp_path, "m.py", source)
    assert read_python(path).defines_factory("get_model") is is_model


def test_the_entry_named_is_the_one_decided(tmp_path):
    path = write(tmp_path, "m.py", "def make():\n    pass\n\n\ndef get_model(cfg):\n    pass\n")
    facts = read_python(path)
    assert facts.defines_factory("make") and not facts.defines_factory("get_model")
    assert facts.why_not(path, "build") == f"{path}: no function build() (use --entry to name the model factory)"


def test_a_file_is_parsed_once_per_content(tmp_path, monkeypatch):
    import ast

    from precisionaudit.frontend import python_file

    parsed, parse = [], ast.parse
    monkeypatch.setattr(python_file.ast, "parse", lambda *a, **k: parsed.append(1) or parse(*a, **k))
    path = write(tmp_path, "once.py", "def get_model():\n    pass\n")
    for _ in range(3):
        assert read_python(path).defines_factory("get_model")
    os.utime(path, ns=(1, 1))  # another version of the file is read again
    read_python(path)
    assert len(parsed) == 2
