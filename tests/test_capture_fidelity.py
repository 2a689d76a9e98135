"""Capture facts found while scanning real architectures (see test_hf_models.py), pinned on
small models that need no transformers: pure mode on fake and meta models, dtype promotion,
an identity `* 1.0` that is no attention scale."""
import pytest
import torch
import torch.nn as nn

from precisionaudit.analysis import run_passes
from precisionaudit.capture.pytorch.capture import capture
from precisionaudit.core.numerics import Target

PURE16 = Target("float16", "pure", "cuda")
AMP16 = Target("float16", "autocast", "cuda")


class TiedLM(nn.Module):
    """Embedding tied to the output projection, a LayerNorm, an LSTM: what .half() converts."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(64, 16)
        self.norm = nn.LayerNorm(16)
        self.rnn = nn.LSTM(16, 16, batch_first=True)
        self.head = nn.Linear(16, 64, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.ones(16))
        self.register_buffer("steps", torch.arange(4))  # an int buffer stays int

    def forward(self, ids):
        x = self.norm(self.embed(ids)) * self.scale
        x, _ = self.rnn(x)
        return self.head(x)


def _ids():
    return (torch.randint(0, 64, (2, 8)),)


def _node_dtypes(graph, op):
    return [a["compute_dtype"] for _, a in graph.nodes(data=True) if a["op"] == op]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_pure_mode_converts_a_fake_model_without_falling_back_to_eager(dtype):
    target = Target(dtype, "pure", "cuda")
    captured = capture(TiedLM, _ids, target)
    assert captured.frontend == "fake", captured.notes  # model.half() on fake params used to raise
    graph = captured.graph
    for op in ("embedding", "layer_norm", "lstm", "linear", "mul"):
        assert _node_dtypes(graph, op) == [dtype], op
    assert graph.graph["outputs"][0]["dtype"] == dtype


def test_pure_mode_keeps_tied_weights_tied_and_int_buffers_int():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from precisionaudit.capture.pytorch.capture import to_dtype

    with FakeTensorMode():
        model = to_dtype(TiedLM(), torch.float16)
    assert model.head.weight is model.embed.weight
    assert isinstance(model.head.weight, nn.Parameter)
    assert model.embed.weight.dtype == model.scale.dtype == torch.float16
    assert model.steps.dtype == torch.int64
    assert all(w.dtype == torch.float16 for w in model.rnn._flat_weights)


def test_pure_mode_scans_a_meta_model():
    """A model built on meta cannot run eagerly: pure mode must work on fake tensors."""

    def build():
        with torch.device("meta"):
            return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))

    captured = capture(build, lambda: (torch.randn(4, 32),), PURE16)
    assert captured.frontend == "fake"
    assert _node_dtypes(captured.graph, "linear") == ["float16", "float16"]


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, bias):
        h = self.proj(x)  # fp16 under autocast
        promoted = h + bias  # fp16 + fp32 tensor: computed in fp32
        scaled = h * torch.tensor(0.5)  # fp16 * fp32 0-d tensor: stays fp16
        return promoted, scaled


def test_mixed_float_dtypes_compute_in_the_promoted_dtype():
    graph = capture(Mixed, lambda: (torch.randn(2, 8), torch.randn(2, 8)), AMP16).graph
    (add,) = [a for _, a in graph.nodes(data=True) if a["op"] == "add"]
    assert sorted(add["in_dtypes"]) == ["float16", "float32"]
    assert add["compute_dtype"] == add["out_dtype"] == "float32"
    (mul,) = [a for _, a in graph.nodes(data=True) if a["op"] == "mul"]
    assert mul["compute_dtype"] == mul["out_dtype"] == "float16"


class Attention(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.qk = nn.Linear(16, 32)
        self.scale = scale

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        return torch.softmax((q @ k.transpose(-1, -2)) * self.scale, dim=-1)


@pytest.mark.parametrize("scale,scaled_after", [(0.25, True), (1.0, False)])
def test_multiplying_logits_by_one_is_not_a_scale(scale, scaled_after):
    graph = run_passes(capture(lambda: Attention(scale), lambda: (torch.randn(2, 4, 16),), AMP16).graph)
    (matmul,) = [a for _, a in graph.nodes(data=True) if a["op"] == "matmul"]
    assert matmul["attention"].feeds_softmax
    assert matmul["attention"].scaled_after is scaled_after
