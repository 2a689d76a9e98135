"""What the training-rule tests share (each rule's tests live in tests/test_training_paNNN.py):
audit a sample or a snippet with a few rules, find a sample's line by its text, and run a
rule page's Example and Use instead blocks (the Fixit VALID/INVALID model: the page cannot
drift from the rule)."""
import json
import os
import re
import textwrap

from precisionaudit.frontend.training import audit as audit_file
from precisionaudit.rules.engine import load_rules

#: a template placeholder nothing filled
PLACEHOLDER = re.compile(r"\{[a-z_]+(?::[^}]*)?\}")
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "training")
#: every training rule, with its check
TRAINING_RULES = [r for r in load_rules() if r.scope == "training"]


class Audit:
    def __init__(self, *ids):
        self.ids = ids
        self.rules = [r for r in TRAINING_RULES if r.id in ids]

    def run(self, path) -> list:
        """The findings, as a scan makes them."""
        return audit_file(str(path), self.rules)

    def findings(self, path):
        """(rule, line) of each finding, sorted."""
        return sorted((f.rule, f.line) for f in self.run(path))

    def conditions(self, path):
        """(rule, line, path condition or None) of each finding, sorted."""
        return sorted((f.rule, f.line, f.evidence.get("condition")) for f in self.run(path))

    def code(self, tmp_path, code, name="train.py"):
        """(rule, line) of the findings in ``code`` (dedented), written to ``name``."""
        return self.findings(write(tmp_path, code, name))

    def code_conditions(self, tmp_path, code, name="train.py"):
        return self.conditions(write(tmp_path, code, name))

    def pair(self, stem, expected) -> dict:
        """Sample ``stem``_hazard.py gives ``expected`` ((rule, line), sorted), every message
        and fix filled; its twin ``stem``_clean.py gives nothing. rule -> one of its findings."""
        hazard = self.run(sample(f"{stem}_hazard.py"))
        assert sorted((f.rule, f.line) for f in hazard) == expected
        assert not any(PLACEHOLDER.search(f.message + f.fix["to"]) for f in hazard)
        assert self.run(sample(f"{stem}_clean.py")) == []
        return {f.rule: f for f in hazard}

    def cases(self, prefix) -> set:
        """(rule, case) of every finding of the hazard samples named ``prefix*`` (the case: what
        a PA421 finding says is low, else the severity), each message and fix filled."""
        seen = set()
        for name in sorted(os.listdir(SAMPLES)):
            if name.startswith(prefix) and "_hazard." in name:
                for f in self.run(sample(name)):
                    assert not PLACEHOLDER.search(f.message + f.fix["to"]) and f.fix["action"] == "edit"
                    seen.add((f.rule, f.evidence.get("what") or f.severity))
        return seen

    def rendered(self, prefix) -> dict:
        """rule -> one finding from the hazard samples named ``prefix*_hazard.py``, each with
        its message and fix filled (no ``{placeholder}`` left)."""
        seen = {}
        for name in sorted(os.listdir(SAMPLES)):
            if name.startswith(prefix) and name.endswith("_hazard.py"):
                for f in self.run(sample(name)):
                    assert "{" not in f.message and "{" not in f.fix["to"], f.message
                    seen[f.rule] = f
        return seen


#: the rule families whose snippets are audited together (a snippet of one rule often
#: shows another's finding too, and the tests say so)
AMP_RULES = ("PA401", "PA402", "PA403", "PA404", "PA408", "PA409")
OPTIM = Audit("PA405", "PA406", "PA407")
DISTRIBUTED = Audit("PA421", "PA422", "PA423")


def amp_audit(path, rules=AMP_RULES) -> list:
    return Audit(*rules).run(path)


def amp_found(path, rules=AMP_RULES) -> list:
    """(rule, line, condition) of the AMP rules' findings in ``path``, sorted."""
    return Audit(*rules).conditions(path)


def amp_lines(name) -> list:
    """(rule, line) of the AMP rules' findings in sample ``name``."""
    return sorted((rule, line) for rule, line, _ in amp_found(sample(name)))


def sample(name):
    return os.path.join(SAMPLES, name)


def write(tmp_path, code, name="train.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return path


def config(tmp_path, text, name="ds_config.json"):
    return write(tmp_path, text, name)


def line_of(path, text, nth=1):
    """The 1-based line of the ``nth`` line of ``path`` that contains ``text`` (that is
    ``text``, stripped, when ``text`` ends with a closing parenthesis: a statement)."""
    exact = text.endswith(")")
    hits = [i for i, line in enumerate(open(path, encoding="utf-8"), 1)
            if (line.strip() == text.strip() if exact else text in line)]
    return hits[nth - 1]


def fixed(path, findings=None):
    """``path``'s text as ``scan --fix`` rewrites it (all its autofixable findings, or those of ``findings``)."""
    from precisionaudit.training.fix import fixed_source
    from precisionaudit.training.source import read_script

    return fixed_source(read_script(str(path)), findings)


def page_blocks(rule_id, tmp_path) -> tuple[list, list]:
    """The rules that fire on the page's Example (``doc.bad``) and on its Use instead
    (``doc.good``), under every training rule: a block that is a JSON object is read as the
    DeepSpeed config it shows, any other as a Python script."""
    (rule,) = [r for r in TRAINING_RULES if r.id == rule_id]
    fired = []
    for kind in ("bad", "good"):
        text = rule.doc[kind]
        try:
            json.loads(text)
            name = f"{kind}_ds_config.json"
        except ValueError:
            name = f"{kind}.py"
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        fired.append(sorted({f.rule for f in audit_file(str(path), TRAINING_RULES)}))
    return fired[0], fired[1]


def assert_page_examples(rule_id, tmp_path):
    """The page's Example fires its rule, and its Use instead fires no training rule."""
    bad, good = page_blocks(rule_id, tmp_path)
    assert rule_id in bad, f"{rule_id}'s Example gives {bad}"
    assert good == [], f"{rule_id}'s Use instead gives {good}"


def twins(prefix) -> list[str]:
    """The clean twins of the samples named ``prefix*``."""
    return sorted(n for n in os.listdir(SAMPLES) if n.startswith(prefix) and "_clean." in n)


def marked(path):
    """(rule, line) of every ``# PA4nn`` marker of a sample script."""
    with open(path, encoding="utf-8") as fh:
        return [(m, n) for n, line in enumerate(fh, 1) for m in re.findall(r"# (PA4\d\d)\b", line)]


def key_line(path, key, nth=0):
    """The line of the ``nth`` occurrence of the JSON key ``key`` in ``path``."""
    with open(path, encoding="utf-8") as fh:
        lines = [n for n, line in enumerate(fh, 1) if f'"{key}"' in line]
    return lines[nth]


#: what the FSDP snippets start with, and the flags they declare (after the code under test:
#: its lines keep their numbers); a condition on ``args.bf16`` names ``--bf16`` as argparse
#: spells it only where the script declares it
HEAD = "import torch\n"
FLAGS = ("import argparse\nparser = argparse.ArgumentParser()\n"
         + "".join(f"parser.add_argument('--{f}', action='store_true')\n" for f in ("bf16", "fp16", "fp32")))

KERAS_LOOP = """
    {imports}
    {set_policy}

    def train(model, dataset, loss_fn):
        optimizer = {optimizer}
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
                {scale}
            grads = tape.gradient({loss}, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""


def keras_loop(tmp_path, imports="import tensorflow as tf\nfrom tensorflow import keras",
               set_policy='keras.mixed_precision.set_global_policy("mixed_float16")',
               optimizer="keras.optimizers.Adam()", scale="", loss="loss"):
    """The Keras rules that fire on a GradientTape training loop written so."""
    code = KERAS_LOOP.format(imports=imports.replace("\n", "\n    "), set_policy=set_policy, optimizer=optimizer,
                             scale=scale or "pass", loss=loss)
    return [rule for rule, _ in Audit("PA431", "PA432", "PA433").code(tmp_path, code)]
