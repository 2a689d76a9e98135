"""Smoke test of the zoo (bench/zoo): a few real transformers architectures, built from their
configs, scanned under the zoo's three targets.

The full zoo (72 models, ~3 min) is a benchmark: ``python bench/zoo_bench.py --verdicts
bench/zoo/verdicts.md``. This keeps its promises from regressing between runs of it, on one
model of each kind: a decoder LM with a padded attention mask and labels (GPT-2, eager
attention), an encoder (BERT, eager), an encoder-decoder (T5), a vision model (ViT) and an
MoE (Mixtral, whose ``_grouped_mm`` needs the scan's own fake kernel). For each scan:
every warning+ site is judged ``true`` in bench/zoo/verdicts.md (a site no row judges fails
too: judge it there, reading the library line), no rule has more than 10 findings, and the
capture ran on fake tensors. The sites, the verdicts and the scan are zoo_bench's own.
diffusers is not a test dependency: the subset is transformers only.
"""
import collections
import os
import sys

import pytest

pytest.importorskip("transformers")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import zoo_bench  # noqa: E402

from precisionaudit.rules.engine import load_rules  # noqa: E402

MODELS = ("gpt2_eager", "bert_eager", "t5", "vit", "mixtral")
#: the per-rule cap of issue 9: the rest of a flood is counted, not listed
MOST_PER_RULE = 10


@pytest.fixture(scope="module")
def rules():
    return load_rules()


@pytest.fixture(scope="module")
def verdicts():
    return zoo_bench.read_verdicts(zoo_bench.VERDICTS)


@pytest.fixture(scope="module")
def scans(rules):
    """(model, target) → (result, findings), each scanned once for the module."""
    return {(name, target): zoo_bench.scan_model(name, target, rules)
            for name in MODELS for target in zoo_bench.TARGETS}


@pytest.mark.parametrize("target", zoo_bench.TARGETS)
@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_scans_on_fake_tensors_with_only_true_sites(scans, verdicts, name, target):
    result, findings = scans[(name, target)]
    assert result.status == "ok", result.error
    assert result.frontend == "fake", f"{name} fell off the fake path under {target}"
    per_rule = collections.Counter(f.rule for f in findings)
    assert max(per_rule.values(), default=0) <= MOST_PER_RULE, per_rule
    for finding in zoo_bench.loud_findings(findings):
        source = zoo_bench.site_of(finding)
        verdict = zoo_bench.verdict_of(verdicts, finding.rule, source)
        assert verdict == "true", (f"{finding.rule} at {source} is judged {verdict or 'nowhere'} in "
                                   f"bench/zoo/verdicts.md: {finding.message}")


def test_the_subset_reaches_judged_sites_of_several_rules(scans, verdicts):
    """Not a vacuous pass: the subset has warning+ sites, of several rules, that the verdicts
    file judges (GPT-2's and BERT's attention logits, BERT's and T5's fp16 losses)."""
    sites = {(f.rule, zoo_bench.site_of(f)) for _, findings in scans.values()
             for f in zoo_bench.loud_findings(findings)}
    assert {"PA106", "PA108", "PA202"} <= {rule for rule, _ in sites}
    assert any(source.endswith("modeling_gpt2.py:58") for rule, source in sites if rule == "PA106")


def test_a_site_the_verdicts_file_calls_false_is_caught(verdicts):
    """The lookup the test relies on: suffix matching of a library line, and a false row."""
    false_rows = [(rule, source) for (rule, source), v in verdicts.items() if v == "false"]
    assert false_rows, "verdicts.md keeps the fixed false positives as rows"
    rule, source = false_rows[0]
    assert zoo_bench.verdict_of(verdicts, rule, "/venv/lib/site-packages/" + source) == "false"
    assert zoo_bench.verdict_of(verdicts, rule, "somewhere/else.py:1") is None
