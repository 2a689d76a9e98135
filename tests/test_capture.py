"""Capture is faithful to the precision policy: dtypes, casts, constants, module paths, lines."""
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, findings_of, sample

from precisionaudit.analysis import run_passes
from precisionaudit.capture.pytorch.capture import capture_file
from precisionaudit.core.numerics import Target
from precisionaudit.runtime.sources import LoadOptions

MODELS = os.path.join(ROOT, "tests", "models")


def model(name):
    return os.path.join(MODELS, name)


def graph_of(path, **target):
    return run_passes(capture_file(path, Target(**target)).graph)


def nodes(graph, op):
    return [a for _, a in graph.nodes(data=True) if a["op"] == op]


def test_cuda_autocast_dtypes_without_a_gpu():
    g = graph_of(model("nested_blocks.py"))
    assert {a["compute_dtype"] for a in nodes(g, "linear")} == {"float16"}
    assert {a["compute_dtype"] for a in nodes(g, "softmax")} == {"float32"}
    assert {a["compute_dtype"] for a in nodes(g, "layer_norm")} == {"float32"}


def test_cpu_autocast_keeps_softmax_low():
    g = graph_of(model("nested_blocks.py"), device="cpu")
    assert {a["compute_dtype"] for a in nodes(g, "softmax")} == {"float16"}


def test_pure_mode_runs_everything_low():
    g = graph_of(model("nested_blocks.py"), mode="pure", dtype="bfloat16")
    assert {a["compute_dtype"] for a in nodes(g, "softmax") + nodes(g, "layer_norm")} == {"bfloat16"}


def test_finfo_constant_is_evaluated_under_the_policy():
    values = {c.value for a in nodes(graph_of(model("nested_blocks.py")), "masked_fill")
              for c in a["constant"].uses}
    assert values == {torch.finfo(torch.float16).min}


def test_finfo_constant_under_bfloat16():
    values = {c.value for a in nodes(graph_of(model("nested_blocks.py"), dtype="bfloat16"), "masked_fill")
              for c in a["constant"].uses}
    assert values == {torch.finfo(torch.bfloat16).min}


def test_module_paths_come_from_named_modules():
    g = graph_of(model("nested_blocks.py"))
    assert [a["module"] for a in nodes(g, "softmax")] == ["blocks.0.attn", "blocks.1.attn"]
    assert [a["module"] for a in nodes(g, "linear")] == ["blocks.0.attn.qkv", "blocks.1.attn.qkv"]


def test_source_line_is_the_users():
    g = graph_of(model("nested_blocks.py"))
    with open(model("nested_blocks.py")) as fh:
        line = next(i for i, text in enumerate(fh, 1) if "masked_fill" in text)
    assert {a["line"] for a in nodes(g, "masked_fill")} == {line}
    assert {a["file"] for a in nodes(g, "masked_fill")} == {model("nested_blocks.py")}


def test_explicit_cast_is_recorded_as_such():
    g = graph_of(model("nested_blocks.py"))
    casts = [a for _, a in g.nodes(data=True) if a["explicit_cast"]]
    # softmax(...).to(v.dtype): fp32 softmax output back to fp16; the final x.float() of an
    # fp32 tensor is a no-op and is not an op at all
    assert [(a["op"], a["in_dtypes"][0], a["out_dtype"], a["precision"].why) for a in casts] == [
        ("to", "float32", "float16", "explicit cast")] * 2


def test_autocast_cast_is_attributed_to_the_op():
    g = graph_of(model("nested_blocks.py"))
    linear = nodes(g, "linear")[0]
    assert (linear["autocast_cast"], linear["in_dtypes"][0], linear["precision"].why) == (
        True, "float32", "autocast: lower_precision_fp list")


def test_edges_follow_the_data():
    g = graph_of(model("nested_blocks.py"))
    ln = next(n for n, a in g.nodes(data=True) if a["op"] == "layer_norm")
    qkv = next(n for n, a in g.nodes(data=True) if a["op"] == "linear")
    assert g.has_edge(ln, qkv)


def test_data_dependent_model_falls_back_to_eager():
    captured = capture_file(model("data_dependent.py"), Target())
    assert captured.frontend == "eager"
    assert any("fake-tensor capture failed" in n for n in captured.notes)
    assert len(nodes(captured.graph, "linear")) == 2


def test_no_example_inputs_runs_structure_checks_and_says_what_it_skipped():
    captured = capture_file(model("no_inputs.py"), Target())
    assert captured.frontend == "structure"
    found = findings_of(model("no_inputs.py"))
    assert {f.rule for f in found} == {"PA201", "PA202"}


def _peak_rss_mib(path):
    code = ("import resource, sys; from precisionaudit.capture.pytorch.capture import capture_file;"
            "from precisionaudit.core.numerics import Target;"
            f"c = capture_file({path!r}, Target()); print(c.frontend, c.graph.number_of_nodes());"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    head, rss = out.stdout.split("\n")[:2]
    return head, int(rss)


def test_meta_model_scans_without_allocating_weights():
    head, rss = _peak_rss_mib(model("huge_meta.py"))
    assert head.startswith("fake") and rss < 1500  # two weights would be 8 GiB


def test_large_model_is_built_on_fake_tensors():
    head, rss = _peak_rss_mib(model("huge_default.py"))
    assert head.startswith("fake") and rss < 1500


def test_values_read_while_building_keep_the_fake_path():
    """trunc_normal_ and a drop-path schedule read tensor values during construction;
    built with initialisation skipped the model still scans on fake tensors (eagerly, its
    two 16384x16384 fp32 weights would take 2 GiB)."""
    head, rss = _peak_rss_mib(model("vit_like_init.py"))
    assert head.startswith("fake") and rss < 1500


def test_building_without_weights_keeps_ties_flags_and_attributes_and_undoes_itself():
    from precisionaudit.runtime.pytorch.model_file import build_without_weights

    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(32, 16)
            self.head = torch.nn.Linear(16, 32, bias=False)
            self.head.weight = self.embed.weight  # tied
            self.scale = torch.nn.Parameter(torch.ones(16), requires_grad=False)
            self.scale.note = "kept"
            self.register_buffer("positions", torch.arange(8.0))
            self.widths = torch.linspace(0, 1, 3).tolist()  # a value read while building

    model, note = build_without_weights(Frozen, "m.py", "get_model")
    assert note is None
    params = dict(model.named_parameters(remove_duplicate=False))
    assert {p.device.type for p in params.values()} == {"meta"}
    assert all(type(p) is torch.nn.Parameter for p in params.values())
    assert params["embed.weight"].untyped_storage()._cdata == params["head.weight"].untyped_storage()._cdata
    assert model.scale.requires_grad is False and model.scale.note == "kept"
    assert model.positions.device.type == "cpu" and model.widths == [0.0, 0.5, 1.0]
    assert torch.nn.Linear(2, 2).weight.device.type == "cpu"  # the hook is gone

    def broken():
        torch.nn.Linear(2, 2)
        raise ValueError("no")
    with pytest.raises(Exception, match="no"):
        build_without_weights(broken, "m.py", "get_model")
    assert torch.nn.Linear(2, 2).weight.device.type == "cpu"  # gone after a failure too


def test_reading_initialised_weights_while_building_builds_them_and_still_runs_fake():
    """The constructor reads a weight's value (.item() of a meta tensor raises): the model is
    built again with its weights, and the forward still runs on fake tensors."""
    captured = capture_file(model("reads_weight_values.py"), Target())
    assert captured.frontend == "fake"
    assert [n for n in captured.notes if n.startswith("built with its weights allocated")]


COMPUTES_WITH_A_PARAMETER = """
import torch
from torch import nn

class Anchored(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        # a CPU tensor meets a parameter while building (SSDlite's anchor generator)
        self.register_buffer("anchors", torch.linspace(0, 1, 8) * self.lin.weight.detach().abs().sum(0))

    def forward(self, x):
        return torch.softmax(self.lin(x) + self.anchors, -1)

def get_model():
    return Anchored()

def get_example_inputs():
    return (torch.randn(2, 8),)
"""


@pytest.mark.parametrize("inputs", ["get_example_inputs", "no_inputs"])
def test_a_constructor_computing_with_a_parameter_is_built_again_with_weights(tmp_path, inputs):
    path = tmp_path / "anchored.py"
    path.write_text(COMPUTES_WITH_A_PARAMETER)
    captured = capture_file(str(path), Target(), LoadOptions(inputs=inputs))
    (note,) = [n for n in captured.notes if n.startswith("built with its weights allocated")]
    assert "Tensor on device meta is not on the expected device cpu" in note
    assert captured.frontend == ("fake" if inputs == "get_example_inputs" else "structure")
    if inputs == "get_example_inputs":
        assert {a["op"] for a in captured.graph.nodes.values()} >= {"linear", "add", "softmax"}


def test_a_constructor_that_fails_for_its_own_reason_is_not_built_twice():
    from precisionaudit.runtime.pytorch.model_file import build_without_weights

    calls = []

    def broken():
        calls.append(1)
        raise ValueError("bad config")
    with pytest.raises(Exception, match="bad config"):
        build_without_weights(broken, "m.py", "get_model")
    assert len(calls) == 1


@pytest.mark.parametrize("mode, dtype", [("autocast", "float32"), ("pure", "float16")])
def test_grouped_mm_moe_captures_on_fake_tensors(mode, dtype):
    """torch's meta kernel for _grouped_mm demands bf16; the real kernels do not. Autocast
    has no kernel for it, so under fp16 autocast it runs in the experts' fp32."""
    captured = capture_file(model("moe_grouped_mm.py"), Target("float16", mode))
    assert captured.frontend == "fake" and not captured.notes
    gemms = [a for a in run_passes(captured.graph).nodes.values() if a["op"] == "_grouped_mm"]
    tokens = 2 * 16
    assert [a["out_shape"] for a in gemms] == [(tokens, 128), (tokens, 64)]
    assert {(a["out_dtype"], a["kernel"].accumulate_dtype) for a in gemms} == {(dtype, "float32")}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_grouped_mm_fake_matches_the_real_kernel(dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from precisionaudit.capture.pytorch.fakes import register_fakes

    register_fakes()
    a = torch.randn(6, 16, dtype=dtype)
    b = torch.randn(2, 8, 16, dtype=dtype).transpose(-2, -1)  # K-major, as the kernel wants
    offs = torch.tensor([2, 6], dtype=torch.int32)
    real = torch._grouped_mm(a, b, offs)
    with FakeTensorMode() as mode:
        fake = torch._grouped_mm(mode.from_tensor(a), mode.from_tensor(b), mode.from_tensor(offs))
    assert (fake.shape, fake.dtype) == (real.shape, real.dtype)


def test_json_report_is_strict_json(cli):
    """-1e9 stored in fp16 is -inf: the report must still parse without NaN/Infinity extensions."""
    import json

    out = cli("scan", sample("pa107_mask_hazard.py"), "--format", "json").stdout

    def refuse(constant):
        raise ValueError(constant)

    report = json.loads(out, parse_constant=refuse)
    assert any(f["evidence"].get("stored") == "-inf" for f in report["findings"])


def test_ops_in_a_disabled_autocast_region_say_so():
    g = graph_of(sample("pa110_positions_clean.py"))
    why = {a["op"]: a["precision"].why for _, a in g.nodes(data=True)}
    assert (why["arange"], why["sin"], why["linear"]) == (
        "autocast disabled here", "autocast disabled here", "autocast: lower_precision_fp list")


def test_the_eager_fallback_runs_cudas_kernels_where_cpu_has_none():
    """CPU has no fp16 LSTM kernel: the eager fallback raised 'not implemented for Half' and
    the scan failed. It now runs CUDA's low-precision kernels emulated in fp32 arithmetic
    (and still records the -1e9 scalar the mask writes, rather than raising CUDA's error)."""
    captured = capture_file(model("data_dependent_lstm.py"), Target())
    assert captured.frontend == "eager"
    assert any("kernels emulated" in n for n in captured.notes), captured.notes
    lstm = [a for _, a in captured.graph.nodes(data=True) if "lstm" in a["op"] or "rnn" in a["op"]]
    assert lstm and {a["compute_dtype"] for a in lstm} == {"float16"}
    assert {f.rule for f in findings_of(model("data_dependent_lstm.py"))} >= {"PA104"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cudnn_rnns_compute_in_float16_under_any_autocast_dtype(dtype):
    """cuDNN's RNN autocast wrapper (AutocastRNN.cpp) casts to float16 whatever the autocast
    dtype: on an H200 an LSTM under bfloat16 autocast read and returned float16
    (bench/gpu_truth.py table 1). The layer after it reads float16 too."""
    captured = capture_file(sample("pa104_lstm_hazard.py"),
                            Target(dtype, "autocast"))
    nodes = list(run_passes(captured.graph).nodes.values())
    lstm = [a for a in nodes if "lstm" in a["op"] or "rnn" in a["op"]]
    assert lstm and {a["compute_dtype"] for a in lstm} == {"float16"}
    assert all("cuDNN RNNs run in float16" in a["precision"].why for a in lstm)


def test_a_forward_that_deep_copies_a_tensor_captures_on_fake_tensors(tmp_path):
    """transformers' Dory deep-copies its cache layers; torch's deepcopy of a fake tensor ``set_``s
    a CPU storage into it and fails ("Attempted to set the storage of a tensor on device meta")."""
    path = tmp_path / "copies.py"
    path.write_text("import copy, torch\nfrom torch import nn\n\n"
                    "class Copies(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.lin = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
                    "        scale = copy.deepcopy(torch.tensor([0.5]))  # a constant, as a new cache holds\n"
                    "        return self.lin(x) * scale\n\n"
                    "def get_model():\n    return Copies()\n\n"
                    "def get_example_inputs():\n    return (torch.randn(2, 8),)\n")
    captured = capture_file(str(path), Target())
    assert captured.frontend == "fake" and not captured.notes
