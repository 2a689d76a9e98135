"""``scan --fix`` on training scripts (training/fix.py): what the analysis on ``ast`` decided
is rewritten with LibCST at its position, and nothing else changes (PA401's insert and
PA409's rewrites: their own tests are in test_training_pa401.py / test_training_pa409.py)."""
import textwrap

import pytest
from training_rules import amp_audit, fixed, sample



@pytest.mark.parametrize("name,rule", [("pa409_deprecated_amp_api_hazard.py", "PA409"),
                                       ("pa401_clip_before_unscale_hazard.py", "PA401")])
def test_fix_rewrites_the_hazard_into_code_the_rule_accepts(tmp_path, name, rule):
    import ast

    original = open(sample(name), encoding="utf-8").read()
    assert all(f.fix.get("autofix") for f in amp_audit(sample(name), [rule]))
    new = fixed(sample(name))
    ast.parse(new)
    rewritten = tmp_path / name
    rewritten.write_text(new)
    assert amp_audit(rewritten, [rule]) == []
    # only the findings' lines (and the deprecated import they come from) change, and PA401
    # adds one line: every other line, comments and blank lines included, is the same
    import difflib

    allowed = {f.line for f in amp_audit(sample(name), [rule])}
    allowed |= {i for i, line in enumerate(original.splitlines(), 1) if line.startswith("from torch.cuda.amp")}
    ops = difflib.SequenceMatcher(a=original.splitlines(), b=new.splitlines(), autojunk=False).get_opcodes()
    changed = {i + 1 for tag, i1, i2, _, _ in ops if tag in ("replace", "delete") for i in range(i1, i2)}
    inserted = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag == "insert")
    assert changed <= allowed
    assert inserted == (1 if rule == "PA401" else 0)


@pytest.mark.parametrize("name", ["pa409_deprecated_amp_api_clean.py", "amp_examples_clean.py",
                                  "pa402_scaler_step_protocol_hazard.py"])
def test_a_file_with_nothing_to_fix_comes_back_byte_identical(name):
    assert fixed(sample(name)) == open(sample(name), encoding="utf-8").read()


def test_auditing_and_fixing_a_training_script_imports_no_torch():
    """The pre-commit hook's cost: a training script is parsed, never imported, and torch
    (a 1-2 s import) is refused in this interpreter as on a machine without it."""
    import subprocess
    import sys

    code = textwrap.dedent(f"""
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(name)

        sys.meta_path.insert(0, NoTorch())
        from precisionaudit.rules.engine import load_rules
        from precisionaudit.frontend.training import audit as audit_file
        from precisionaudit.training.fix import fixed_source
        from precisionaudit.training.source import read_script
        path = {sample("pa401_clip_before_unscale_hazard.py")!r}
        print(len(audit_file(path, [r for r in load_rules() if r.id == "PA401"])), "scaler.unscale_(optimizer)" in fixed_source(read_script(path)))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "True"]
