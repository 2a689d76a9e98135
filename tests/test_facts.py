"""Typed facts: each analysis pass writes one record under its own key, and the old flat fact
keys that rule packs name keep matching exactly as before (analysis/facts.py)."""
import copy
import dataclasses
import os

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, sample, scanned_graph
from torch import nn

from precisionaudit.analysis import PASSES, run_passes
from precisionaudit.analysis.facts import ALIASES, RECORDS, fact, flat
from precisionaudit.capture.pytorch.capture import capture
from precisionaudit.core.errors import UsageError
from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.frontend import frontend_for
from precisionaudit.ir.graph import CAPTURE_KEYS, OpNode
from precisionaudit.runtime.sources import DEFAULT_LOAD
from precisionaudit.rules.engine import Rule, _matches, _parse, format_template, _node_values

OPNODE_FIELDS = {f.name for f in dataclasses.fields(OpNode)}
#: (model file, target): together they give every old flat key a value other than None
#: somewhere (a greedy cover over the sample models and test models)
SAMPLES = [(os.path.join(ROOT, "tests", "models", "nested_blocks.py"), ("bfloat16", "pure")),
           (sample("pa113_phase_hazard.py"), ("bfloat16", "pure")),
           (sample("pa102_groupnorm_hazard.py"), ("float16", "autocast")),
           (sample("pa101_softmax_hazard.py"), ("bfloat16", "pure"))]


class CosineAttention(nn.Module):
    """Normalised q and k: the range pass bounds their rows' L2 norm (l2_bound)."""

    def forward(self, q, k):
        return torch.softmax(F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-1, -2) * 10, -1)


def _captured():
    """Captured graphs, before the passes: the samples, cosine attention, and a graph with
    calibration statistics (--data)."""
    graphs = [frontend_for(path).capture(path, Target(dtype, mode, "cuda"), DEFAULT_LOAD).graph
              for path, (dtype, mode) in SAMPLES]
    graphs.append(capture(CosineAttention, lambda: (torch.randn(2, 4, 8), torch.randn(2, 4, 8)),
                          Target("float16", "autocast", "cuda")).graph)
    fp8 = sample("pa602_fp8_head_hazard.py")  # an FP8 target: the fp8 pass writes its record
    fp8_target = Target("bfloat16", "autocast", "cuda", "tensorwise")
    graphs.append(frontend_for(fp8).capture(fp8, fp8_target, DEFAULT_LOAD).graph)
    # with --data as well: the fp8_ranges pass writes its record on the measured Linears
    frontend_for(fp8).measure(graphs[-1], fp8, fp8_target, DEFAULT_LOAD, ValueOptions(data="example"))
    fp4 = sample("pa612_fp4_head_hazard.py")  # an FP4 target: the fp4 passes write theirs (with --data)
    fp4_target = Target.named("nvfp4")
    graphs.append(frontend_for(fp4).capture(fp4, fp4_target, DEFAULT_LOAD).graph)
    frontend_for(fp4).measure(graphs[-1], fp4, fp4_target, DEFAULT_LOAD, ValueOptions(data="example"))
    measured = sample("pa105_exp_hazard.py")
    frontend, target = frontend_for(measured), Target("float16", "pure", "cuda")
    with_data = frontend.capture(measured, target, DEFAULT_LOAD)
    frontend.measure(with_data.graph, measured, target, DEFAULT_LOAD, ValueOptions(data="example"))
    # batches whose run under the target overflows: the fp32 reference is recorded on them
    hot = sample("pa301_attention_hazard.py")
    target = Target("float16", "autocast", "cuda")
    with_reference = frontend.capture(hot, target, DEFAULT_LOAD)
    frontend.measure(with_reference.graph, hot, target, DEFAULT_LOAD, ValueOptions(data="calibration_batches"))
    return graphs + [with_data.graph, with_reference.graph]


@pytest.fixture(scope="module")
def captured():
    return _captured()


@pytest.fixture(scope="module")
def analysed(captured):
    return [run_passes(copy.deepcopy(g)) for g in captured]


def test_each_pass_writes_exactly_one_record_of_its_own_and_changes_nothing_else(captured):
    written = {}  # record key -> the pass that wrote it
    for graph in captured:
        graph = copy.deepcopy(graph)
        for annotate in PASSES:
            before = {n: dict(a) for n, a in graph.nodes(data=True)}
            annotate(graph)
            keys = set()
            for name, attrs in graph.nodes(data=True):
                new = {k for k in attrs if k not in before[name] or attrs[k] is not before[name][k]}
                keys |= new
                for k in new:
                    assert k in RECORDS, f"{annotate.__module__} wrote {k!r}, which is no fact record"
                    assert isinstance(attrs[k], RECORDS[k]), (annotate.__module__, k, attrs[k])
            assert len(keys) <= 1, f"{annotate.__module__} wrote {sorted(keys)}: one record per pass"
            for k in keys:
                assert written.setdefault(k, annotate.__module__) == annotate.__module__, \
                    f"{k!r} is written by {written[k]} and {annotate.__module__}"
    assert set(written) == set(RECORDS), "every record has a pass that writes it on these graphs"


def test_a_node_holds_opnode_fields_capture_operands_and_records_only(analysed):
    for graph in analysed:
        for name, attrs in graph.nodes(data=True):
            assert set(attrs) <= OPNODE_FIELDS | set(CAPTURE_KEYS) | set(RECORDS), (name, set(attrs) - OPNODE_FIELDS)


def test_the_alias_table_names_real_record_fields():
    for old, path in ALIASES.items():
        key, _, attr = path.partition(".")
        names = {f.name for f in dataclasses.fields(RECORDS[key])}
        assert attr in names or isinstance(getattr(RECORDS[key], attr), property), (old, path)
        assert old not in OPNODE_FIELDS and old not in RECORDS, f"{old!r} would shadow a node key"


def _rule(where, message="{op}", bundled=False):
    return Rule(id="EX900", name="example", summary="s", severity={"default": "info"}, message=message,
                doc={}, match={"where": where}, bundled=bundled)


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_an_old_flat_key_matches_the_same_nodes_as_its_record_field(old, analysed):
    """``where: {old_key: value}`` selects exactly the nodes ``where: {record.field: value}``
    does, for every value the key takes, and a value it does not take selects none."""
    seen = [(g, n, fact(a, old)) for g in analysed for n, a in g.nodes(data=True) if fact(a, old) is not None]
    assert seen, f"no sample graph gives {old!r} a value: the test would prove nothing"
    for value in {repr(v): v for _, _, v in seen}.values():
        for graph in analysed:
            by_old = {n for n, a in graph.nodes(data=True) if _matches(_rule({old: value}), a)}
            by_path = {n for n, a in graph.nodes(data=True) if _matches(_rule({ALIASES[old]: value}), a)}
            assert by_old == by_path
            assert by_old == {n for n, a in graph.nodes(data=True) if fact(a, old) == value}
    graph, name, value = seen[0]
    assert not _matches(_rule({old: "not a value any fact takes"}), graph.nodes[name])


def test_old_keys_read_from_their_records(analysed):
    """The old flat names give the records' values: a norm's pattern, a softmax's kind."""
    nodes = [a for g in analysed for _, a in g.nodes(data=True)]
    norm = next(a for a in nodes if "norm" in a)
    assert fact(norm, "norm_pattern") == norm["norm"].pattern == fact(norm, "norm.pattern")
    assert flat(norm)["norm_pattern"] == norm["norm"].pattern
    constants = next(a for a in nodes if a["constant"].uses)
    assert fact(constants, "constants") == [dataclasses.asdict(c) for c in constants["constant"].uses]
    # the flat key holds the fp32 reference's statistics where they were recorded
    measured = next(a for a in nodes if "calibration" in a and a["calibration"].stats)
    assert fact(measured, "measured")["max_abs"] == measured["calibration"].stats["max_abs"]
    assert fact(measured, "measured")["key"] == measured["calibration"].key


def test_nodes_without_a_pattern_read_none_as_before(analysed):
    """A pattern pass writes nothing where it found nothing: the old keys read None there, as
    ``node.get`` did, and the former OpNode fields are still placeholders a message may name."""
    plain = next(a for g in analysed for _, a in g.nodes(data=True) if "norm" not in a and "reduction" not in a)
    assert fact(plain, "norm_pattern") is None and fact(plain, "reduced_extent") is None
    assert "norm_pattern" not in flat(plain) and flat(plain)["reduced_extent"] is None


def test_messages_name_facts_by_their_old_flat_names_not_the_records(analysed):
    node = next(a for g in analysed for _, a in g.nodes(data=True) if "norm" in a)
    values = _node_values(node)
    assert "norm" not in values and "precision" not in values
    text = format_template(_rule({}, bundled=True), "{op}: {norm_pattern} ({why}, {low_precision})", values)
    assert text == f"{node['op']}: {node['norm'].pattern} ({node['precision'].why}, {node['precision'].low_precision})"


def test_a_pack_may_match_a_record_field_by_its_dotted_path(analysed):
    rule = _parse({"id": "EX901", "name": "n", "summary": "s", "severity": "info", "message": "m",
                   "doc": {"what": "w", "why": "y"}, "match": {"where": {"norm.pattern": "mean of squares"}}},
                  "pack/EX901.yaml", checks=False)
    hits = [a for g in analysed for _, a in g.nodes(data=True) if _matches(rule, a)]
    assert hits and all(a["norm"].pattern == "mean of squares" for a in hits)


@pytest.mark.parametrize("key,says", [
    ("norms.pattern", "'norms.pattern' names no fact record \\(records: attention, calibration, "),
    ("norm.patern", "'norm.patern': NormFacts has no field 'patern' \\(fields: pattern, square_node, square_dtype\\)$"),
])
def test_a_dotted_key_that_names_no_fact_is_one_clear_error(key, says):
    with pytest.raises(UsageError, match=f"pack/EX902.yaml: match.where: {says}"):
        _parse({"id": "EX902", "name": "n", "summary": "s", "severity": "info", "message": "m",
                "doc": {"what": "w", "why": "y"}, "match": {"where": {key: 1}}}, "pack/EX902.yaml", checks=False)
