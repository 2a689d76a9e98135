"""The judged incident corpora's tests, made for one corpus directory (``make_tests``): the
corpus of torch-level incidents (samples/training/incidents/, tests/test_training_incidents.py)
and the corpus of frameworks' incidents (samples/training/frameworks/,
tests/test_training_framework_incidents.py) hold their files to the same format and are judged
the same way. What is asserted is said in each test module's docstring."""
from __future__ import annotations

import functools
import io
import json
import os
import re
import tokenize

import pytest

from precisionaudit.frontend.training import audit as audit_file
from precisionaudit.rules.engine import load_rules

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ITEM = r"PA\d{3}(?:\s*\[if [^\]]+\])?"
_MARKER = re.compile(r"#\s*(expect|residual):\s*(%s(?:\s*,\s*%s)*)\s*$" % (_ITEM, _ITEM))
_PART = re.compile(r"(PA\d{3})(?:\s*\[if ([^\]]+)\])?")


def make_tests(corpus: str, known_misses: dict, contract_ids: set, minimum: int) -> dict:
    """The corpus tests of the directory ``corpus`` (under the repository), as a dict of test
    functions for a test module's globals. ``known_misses``: (file, rule) -> why the rules
    stay silent there (strict xfails); ``contract_ids``: the rule ids markers may name;
    ``minimum``: how many hazards the corpus holds at least."""
    CORPUS = os.path.join(ROOT, corpus)
    CONFIG_EXPECTATIONS = os.path.join(CORPUS, "config_expectations.json")
    CONTRACT_IDS = contract_ids
    KNOWN_MISSES = known_misses

    def _files(suffix: str) -> list[str]:
        return sorted(f for f in os.listdir(CORPUS) if f.endswith(suffix))


    def _twin(hazard: str) -> str:
        return hazard.replace("_hazard.", "_fixed.")


    def _markers(name: str, kind: str) -> list[tuple[str, int]]:
        """(rule, line) of every ``# kind: PA...`` comment in a corpus script (comments only)."""
        return [(rule, line) for rule, line, _ in _conditional_markers(name, kind)]


    def _conditional_markers(name: str, kind: str) -> list[tuple[str, int, tuple]]:
        """(rule, line, condition words) of every ``# kind: PA... [if a|b]`` comment."""
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            source = f.read()
        found = []
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            m = _MARKER.search(tok.string)
            if m and m.group(1) == kind:
                for part in _PART.finditer(m.group(2)):
                    words = tuple(w.strip() for w in part.group(2).split("|")) if part.group(2) else ()
                    found.append((part.group(1), tok.start[0], words))
        return found


    def _key_line(text: str, dotted: str) -> int:
        """The 1-based line of the last key of ``dotted`` ("fp16.loss_scale"), each key searched
        after its parent's position."""
        pos = 0
        for part in dotted.split("."):
            m = re.compile(r'"%s"\s*:' % re.escape(part)).search(text, pos)
            assert m, f"key path {dotted!r}: {part!r} not found"
            pos = m.start()
        return text.count("\n", 0, pos) + 1


    def _config_expectations() -> dict:
        if not os.path.exists(CONFIG_EXPECTATIONS):
            return {}  # a corpus of scripts only
        with open(CONFIG_EXPECTATIONS, encoding="utf-8") as f:
            return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


    def _expected(name: str) -> list[tuple[str, frozenset]]:
        """(rule, allowed lines) per expected finding of a corpus file: one entry per finding."""
        if name.endswith(".py"):
            kind = "expect" if "_hazard." in name else "residual"
            return [(rule, frozenset({line})) for rule, line in _markers(name, kind)]
        if "_fixed." in name:
            return []
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            text = f.read()
        return [(e["rule"], frozenset(_key_line(text, k) for k in e["keys"]))
                for e in _config_expectations().get(name, [])]


    @functools.cache
    def _known_ids() -> frozenset:
        return frozenset(r.id for r in load_rules(checks=False))


    @functools.cache
    def _training_rules() -> tuple:
        return tuple(r for r in load_rules(checks=False) if r.id.startswith("PA4"))


    @functools.cache
    def _findings(name: str) -> tuple:
        """Every PA4xx finding of auditing one corpus file (audited once per session)."""
        findings = audit_file(os.path.join(CORPUS, name), list(_training_rules()))
        return tuple(f for f in findings if f.rule.startswith("PA4"))


    def _found(name: str) -> tuple:
        return tuple((f.rule, f.line) for f in _findings(name))


    def _require(rule: str) -> None:
        if rule not in _known_ids():
            pytest.skip(f"{rule} is not in the rule catalog yet (load_rules() does not know it)")


    def _matches(found_lines: list[int], expected: list[frozenset]) -> bool:
        """Whether the found lines pair one-to-one with the expected entries (each a line set)."""
        if len(found_lines) != len(expected):
            return False
        remaining = list(expected)
        for line in sorted(found_lines):
            hit = next((e for e in remaining if line in e), None)
            if hit is None:
                return False
            remaining.remove(hit)
        return True


    def _param(*values, key, id):
        reason = KNOWN_MISSES.get(key)
        marks = [pytest.mark.xfail(strict=True, reason=f"known miss: {reason}")] if reason else []
        return pytest.param(*values, id=id, marks=marks)


    def _rule_cases(pattern: str, rules_of) -> list:
        return [_param(name, rule, key=(name, rule), id=f"{name}-{rule}")
                for name in _files(pattern) for rule in rules_of(name)]


    def _hazard_rules(name: str) -> list[str]:
        return sorted({rule for rule, _ in _expected(name)})


    def _fixed_rules(name: str) -> list[str]:
        hazard = name.replace("_fixed.", "_hazard.")
        return sorted({rule for rule, _ in _expected(hazard)} | {rule for rule, _ in _expected(name)})


    @pytest.mark.parametrize("name, rule", _rule_cases("_hazard.py", _hazard_rules)
                             + _rule_cases("_hazard.json", _hazard_rules))
    def test_hazard_reports_exactly_the_marked_lines(name, rule):
        _require(rule)
        expected = [lines for r, lines in _expected(name) if r == rule]
        found = [line for r, line in _found(name) if r == rule]
        assert _matches(found, expected), (
            f"{name}: {rule} expected on line(s) {sorted(set().union(*expected))}, reported on {sorted(found)}")


    def _condition_cases() -> list:
        return [_param(name, rule, line, words, key=(name, rule), id=f"{name}-{rule}-{line}")
                for name in _files("_hazard.py")
                for rule, line, words in _conditional_markers(name, "expect") if words]


    @pytest.mark.parametrize("name, rule, line, words", _condition_cases())
    def test_a_conditional_hazard_names_its_condition(name, rule, line, words):
        """The hazard holds only under a flag: the message must say under which one."""
        _require(rule)
        conditions = [str(f.evidence.get("condition", "")) for f in _findings(name)
                      if f.rule == rule and f.line == line]
        if not conditions:
            pytest.fail(f"{name}:{line}: no {rule} finding (the marked-lines test says where)")
        assert any(w.lower() in c.lower() for c in conditions for w in words), (
            f"{name}:{line}: {rule} condition {conditions} names none of {list(words)}")


    @pytest.mark.parametrize("name, rule", _rule_cases("_fixed.py", _fixed_rules)
                             + _rule_cases("_fixed.json", _fixed_rules))
    def test_fixed_twin_reports_none_of_its_hazards_rules(name, rule):
        _require(rule)
        expected = [lines for r, lines in _expected(name) if r == rule]
        found = [line for r, line in _found(name) if r == rule]
        assert _matches(found, expected), (
            f"{name}: {rule} reported on {sorted(found)}; the fix should leave "
            f"{sorted(set().union(*expected)) if expected else 'no'} finding(s)")


    @pytest.mark.parametrize("name", _files(".py") + [f for f in _files(".json")
                                                       if f != os.path.basename(CONFIG_EXPECTATIONS)])
    def test_no_unmarked_training_findings(name):
        """A PA4xx finding that no marker asks for is a false positive on the corpus."""
        if not _training_rules():
            pytest.skip("no PA4xx rule is in the rule catalog yet")
        allowed = {(rule, line) for rule, lines in _expected(name) for line in lines}
        stray = sorted(set(_found(name)) - allowed)
        assert not stray, f"{name}: unmarked findings {stray}"


    # ---- the corpus itself (no rule needed) ----------------------------------------------------

    def test_every_hazard_has_a_fixed_twin_and_an_expectation():
        hazards = _files("_hazard.py") + _files("_hazard.json")
        assert len(hazards) >= minimum
        for name in hazards:
            assert os.path.exists(os.path.join(CORPUS, _twin(name))), f"{name} has no fixed twin"
            assert _expected(name), f"{name} expects no finding"
        fixed = _files("_fixed.py") + _files("_fixed.json")
        assert sorted(f.replace("_fixed.", "_hazard.") for f in fixed) == sorted(hazards)


    def test_markers_name_contract_rules_and_fixed_twins_carry_no_expect_marker():
        for name in _files(".py"):
            for rule, _ in _markers(name, "expect") + _markers(name, "residual"):
                assert rule in CONTRACT_IDS, f"{name}: {rule} is not a training rule id"
            if "_fixed." in name:
                assert not _markers(name, "expect"), f"{name}: a fixed twin carries an expect marker"
            else:
                assert not _markers(name, "residual"), f"{name}: residual markers belong to fixed twins"
        for name, entries in _config_expectations().items():
            assert os.path.exists(os.path.join(CORPUS, name)), f"manifest names a missing {name}"
            assert all(e["rule"] in CONTRACT_IDS and e["keys"] for e in entries)


    def test_residuals_are_hazards_the_twin_did_not_claim_to_fix():
        """A residual rule must also be expected on the hazard: the fix left it, it did not add it."""
        for name in _files("_fixed.py"):
            hazard_rules = {rule for rule, _ in _markers(name.replace("_fixed.", "_hazard."), "expect")}
            for rule, line in _markers(name, "residual"):
                assert rule in hazard_rules, f"{name}:{line} residual {rule} is not expected on the hazard"


    def test_every_script_parses_and_cites_its_source():
        import ast

        for name in _files(".py"):
            with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
                module = ast.parse(f.read(), filename=name)
            doc = ast.get_docstring(module) or ""
            assert re.search(r"https://github\.com/\S+/(issues|pull)/\d+", doc), f"{name} cites no thread"


    def test_readme_lists_every_incident():
        with open(os.path.join(CORPUS, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        for name in _files("_hazard.py") + _files("_hazard.json"):
            slug = name.rsplit("_hazard.", 1)[0]
            assert f"`{slug}`" in readme, f"README.md has no row for {slug}"

    return {name: value for name, value in locals().items() if name.startswith("test_")}
