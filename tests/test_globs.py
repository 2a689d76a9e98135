"""The one dotted-path glob (core.globs): plans and [[suppress]] patterns mean the same by it."""
import time

import pytest

from precisionaudit.core.findings import Finding
from precisionaudit.core.globs import matches
from precisionaudit.settings.suppressions import suppress_patterns


@pytest.mark.parametrize("pattern,path,expected", [
    ("blocks.*", "blocks.0", True),
    ("blocks.*", "blocks.0.attn.qkv", False),  # * is exactly one component
    ("blocks.**", "blocks.0.attn.qkv", True),
    ("blocks.**", "blocks", True),  # ** may be no component at all
    ("**.qkv", "blocks.0.attn.qkv", True),
    ("**.qkv", "qkv", True),
    ("**", "blocks.0", True),
    ("**", "", False),  # the root is matched by "" only
    ("blocks.*.attn.*", "blocks.11.attn.qkv", True),
    ("blocks.1?.attn", "blocks.11.attn", True),
    ("blocks.1?.attn", "blocks.1.attn", False),
    ("blocks.[02].attn", "blocks.2.attn", True),
    ("att*", "attn", True),
    ("att*", "attn.qkv", False),
    ("a.**.b.**.c", "a.x.b.y.z.c", True),
    ("a.**.b.**.c", "a.x.c.y.b", False),
    ("lm_head", "lm_head", True),
    ("lm_head", "lm_head2", False),
])
def test_star_is_one_component_and_double_star_any_number(pattern, path, expected):
    assert matches(pattern, path) is expected


@pytest.mark.parametrize("pattern,path", [
    ("**." * 8 + "x", "a." * 30),
    (".".join(["**"] * 24) + ".x", "a." * 30 + "b"),
    (".".join(["**", "*"] * 12) + ".x", ".".join(["a"] * 40)),
    ("*a*a*a*a*a*a*a*a*a*a*b", "a" * 60),
])
def test_failing_matches_with_many_stars_return_at_once(pattern, path):
    start = time.perf_counter()
    assert matches(pattern, path) is False
    assert time.perf_counter() - start < 0.05


def _finding(module, node=None, op="linear"):
    return Finding(rule="PA201", name="tc-unaligned-gemm", severity="warning", path="m.onnx", line=None,
                   model="m.onnx", node=node, op=op, module=module, message="")


def test_suppress_module_patterns_use_the_plan_glob():
    deep, shallow = _finding("blocks.0.attn.qkv"), _finding("blocks.0")
    entries = [{"rule": ["PA2"], "module": "blocks.*"}]
    assert suppress_patterns([deep, shallow], entries, None) == [deep]
    entries = [{"rule": ["PA2"], "module": "blocks.**"}]
    assert suppress_patterns([deep, shallow], entries, None) == []


def test_suppress_node_and_op_patterns_use_the_plan_glob():
    found = [_finding("", node="matmul_3", op="matmul"), _finding("", node="linear_0", op="linear")]
    assert suppress_patterns(found, [{"rule": ["ALL"], "node": "matmul_*"}], None) == found[1:]
    assert suppress_patterns(found, [{"rule": ["PA201"], "op": "lin*"}], None) == found[:1]
