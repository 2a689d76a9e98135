"""What the training-rule tests share: audit a sample or a snippet with a few rules, and
render one finding of each rule from its hazard samples (templates are strict)."""
import os
import textwrap

from precisionaudit.rules.engine import load_rules
from precisionaudit.frontend.training import audit as audit_file

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "training")


class Audit:
    def __init__(self, *ids):
        self.ids = ids
        self.rules = [r for r in load_rules() if r.id in ids]

    def findings(self, path):
        """(rule, line) of each finding, sorted."""
        return sorted((f.rule, f.line) for f in audit_file(str(path), self.rules))

    def code(self, tmp_path, code):
        path = tmp_path / "train.py"
        path.write_text(textwrap.dedent(code))
        return self.findings(path)

    def rendered(self, prefix) -> dict:
        """rule -> one finding from the hazard samples named ``prefix*_hazard.py``, each with
        its message and fix filled (no ``{placeholder}`` left)."""
        seen = {}
        for name in sorted(os.listdir(SAMPLES)):
            if name.startswith(prefix) and name.endswith("_hazard.py"):
                for f in audit_file(sample(name), self.rules):
                    assert "{" not in f.message and "{" not in f.fix["to"], f.message
                    seen[f.rule] = f
        return seen


def sample(name):
    return os.path.join(SAMPLES, name)
