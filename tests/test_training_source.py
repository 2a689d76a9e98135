"""A training script as the training stage reads it (training/source.py, index.py): parsed
once with CPython's ``ast`` (a file it cannot parse is a UsageError naming the line, unless a
newer Python parses it), names resolved through the file's imports as Python resolves them,
positions in characters, and nothing analysed where the text says no check can fire."""
import textwrap

import pytest
from training_rules import OPTIM, amp_audit, sample, write

from precisionaudit.training.index import Index
from precisionaudit.training.source import Script

optim_code = OPTIM.code_conditions


@pytest.mark.parametrize("text", [
    "def f(:\n    pass\n",  # no AMP word: the prefilter spares the analysis, not the parse
    "import torch\nscaler = torch.amp.GradScaler(\n",  # no step word: likewise
    "import torch\nscaler.scale(loss).backward()\nif x\n"])  # analysed
def test_a_file_that_does_not_parse_is_a_usage_error_naming_its_line(tmp_path, text):
    """Whether or not the prefilter spares it the analysis: one line, file and line."""
    from precisionaudit.core.errors import UsageError

    path = tmp_path / "broken.py"
    path.write_text(text)
    with pytest.raises(UsageError, match=r"broken.py:\d+:\d+: cannot parse"):
        amp_audit(path)


def test_syntax_newer_than_the_interpreter_is_not_an_error_when_libcst_reads_it(tmp_path):
    """The prefilter's syntax check uses CPython's parser; a construct it does not know
    (a 3.12 ``type`` alias under 3.11) is left to LibCST, as the analysed files are."""
    path = tmp_path / "aliases.py"
    path.write_text("type Vector = list[float]\n\n\ndef norm(v: Vector) -> float:\n    return sum(x * x for x in v)\n")
    assert amp_audit(path) == []


def test_a_file_none_of_these_checks_can_fire_on_is_not_analysed(tmp_path, monkeypatch):
    """The textual gate: CPython parses the file (a syntax error is still reported), but no
    index, no walk, no lookup is made for a file that builds no optimizer over a low dtype,
    names no GradScaler and no fp16 Trainer."""
    monkeypatch.setattr(Index, "__init__", lambda self, script: pytest.fail("analysed"))
    assert optim_code(tmp_path, """
        import torch
        model = Net()
        opt = torch.optim.Adam(model.parameters())
    """) == []


def test_a_skipped_file_that_does_not_parse_is_still_reported(tmp_path):
    from precisionaudit.core.errors import UsageError

    path = tmp_path / "broken.py"
    path.write_text("import torch\n\ndef f(:\n    pass\n")
    with pytest.raises(UsageError, match=r"broken\.py:\d+:\d+: cannot parse"):
        OPTIM.run(path)


def test_a_generated_file_of_50000_lines_is_skipped_not_hung_on(tmp_path, monkeypatch):
    monkeypatch.setattr(Index, "__init__", lambda self, script: pytest.fail("analysed"))
    body = "".join(f"def f{i}(model):\n    model.half()\n    return torch.optim.SGD(model.parameters(), lr=1)\n"
                   for i in range(16_700))
    assert optim_code(tmp_path, "import torch\n" + body) == []


def test_auditing_a_training_script_imports_no_torch():
    """The pre-commit hook's promise: a training script is read, never run, and torch is
    never imported (numpy rounds eps)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from precisionaudit.rules.engine import load_rules\n"
            "from precisionaudit.frontend.training import audit as audit_file\n"
            "rules = [r for r in load_rules(checks=False) if r.id in ('PA405', 'PA406', 'PA407')]\n"
            f"found = audit_file({sample('pa406_optimizer_eps_underflow_hazard.py')!r}, rules)\n"
            "print(sorted(f.rule for f in found), 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['PA406', 'PA407'] False"



def names(code: str, expression: str) -> set:
    """The qualified names the last ``expression`` in ``code`` stands for."""
    script = Script("t.py", textwrap.dedent(code))
    nodes = [n for n in script.index.names.read_in if script.source(n) == expression.split(".")[0]]
    node = nodes[-1]
    while script.source(node) != expression:
        node = script.index.parents[node]
    return script.names_of(node)


@pytest.mark.parametrize("code,expression,expected", [
    ("from torch.amp import GradScaler as GS\nGS", "GS", {"torch.amp.GradScaler"}),
    ("import torch.nn.utils as nu\nnu.clip_grad_norm_", "nu.clip_grad_norm_", {"torch.nn.utils.clip_grad_norm_"}),
    ("import torch.nn\ntorch.optim.AdamW", "torch.optim.AdamW", {"torch.optim.AdamW"}),
    ("from torch.cuda import amp\namp.GradScaler", "amp.GradScaler", {"torch.cuda.amp.GradScaler"}),
    # both imports may have run: a fallback reads as either
    ("try:\n    from torch.amp import GradScaler\nexcept ImportError:\n    from torch.cuda.amp import GradScaler\n"
     "GradScaler", "GradScaler", {"torch.amp.GradScaler", "torch.cuda.amp.GradScaler"}),
    # a function's own binding hides the module's import; a class body is not a method's scope
    ("import torch\ndef f(torch):\n    torch.float16", "torch.float16", {"<local>.torch.float16"}),
    ("import torch\nclass C:\n    torch = None\n    def f(self):\n        torch.float16", "torch.float16",
     {"torch.float16"}),
    ("def f():\n    import torch\n    torch.half", "torch.half", {"torch.half"}),
    ("str", "str", {"builtins.str"}),
    ("torch.float16", "torch.float16", set()),  # never imported: nothing to resolve
])
def test_names_resolve_through_the_files_imports_as_python_resolves_them(code, expression, expected):
    assert names(code, expression) == expected


def test_columns_are_characters_not_bytes(tmp_path):
    """CPython's offsets are UTF-8 bytes; a finding's column counts characters, as editors do."""
    path = write(tmp_path, """\
        import torch
        from torch.cuda.amp import autocast
        π = 3.14; ctx = autocast()
        """)
    (finding,) = amp_audit(path, ["PA409"])
    assert (finding.line, finding.column) == (3, len("π = 3.14; ctx = ") + 1)
