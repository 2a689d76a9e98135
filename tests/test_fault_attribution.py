"""When the forward fails on fake tensors, the scan says whose error it is (issue 44): a real run
(the model itself when its weights fit, else a small build of its config) fails too, and the
message names the model's own error; or it runs, and the scan falls back to the next capture
(eager, else the module structure) and says why. A scan's limit never reads as the user's bug."""
from pathlib import Path

import pytest
import torch
from conftest import ROOT  # noqa: F401 - puts the repository on sys.path

from precisionaudit.capture.pytorch import capture as pytorch
from precisionaudit.capture.pytorch.capture import capture_file
from precisionaudit.core.errors import CaptureError
from precisionaudit.core.numerics import Target
from precisionaudit.runtime.pytorch.small_config import small_config

#: a forward fake tensors cannot run and real ones can: a library's check for plain tensors
PLAIN_ONLY = """
import torch
from torch import nn

class PlainOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 64)

    def forward(self, x):
        if type(x) is not torch.Tensor:
            raise RuntimeError("plain tensors only")
        return torch.softmax(self.lin(x), -1)

def get_model():
    {build}

def get_example_inputs():
    return (torch.randn(4, 64),)
"""


def _model_file(tmp_path, build="return PlainOnly()"):
    path = tmp_path / "plain_only.py"
    path.write_text(PLAIN_ONLY.replace("{build}", build))
    return str(path)


def test_a_forward_only_fake_tensors_fail_is_captured_eagerly_and_said_to_be_the_scans_limit(tmp_path):
    captured = capture_file(_model_file(tmp_path), Target())
    assert captured.frontend == "eager"
    (note,) = [n for n in captured.notes if n.startswith("fake-tensor capture failed")]
    assert "RuntimeError: plain tensors only" in note and "a limit of the scan's fake tensors" in note
    assert {a["op"] for a in captured.graph.nodes.values()} >= {"linear", "softmax"}


def test_a_fake_failure_no_real_run_can_check_says_it_was_not_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(pytorch, "eager_budget", lambda: 0)
    with pytest.raises(CaptureError) as failed:
        capture_file(_model_file(tmp_path), Target())
    message = str(failed.value)
    assert "the forward failed on fake tensors: RuntimeError: plain tensors only (not checked on real tensors, " \
           "since its weights take 16.2 KiB" in message
    assert "the scan's limit or the model's error" in message and "the model's own error" not in message


@pytest.mark.parametrize("why, build", [
    ("its weights take", "return PlainOnly()"),
    ("its factory builds it on the meta device", "with torch.device('meta'):\n        return PlainOnly()"),
])
def test_fake_tensors_known_limits_on_a_model_too_large_to_run_fall_back_to_the_structure(
        tmp_path, monkeypatch, why, build):
    """Data-dependent control flow is fake tensors' known limit: without a real run the scan
    reports the module structure, and the note says so (it used to be an error)."""
    path = tmp_path / "gated.py"
    source = Path(_model_file(tmp_path, build)).read_text()
    path.write_text(source.replace("if type(x) is not torch.Tensor:", "if x.sum() > 1e30:"))
    if why == "its weights take":
        monkeypatch.setattr(pytorch, "eager_budget", lambda: 0)
    captured = capture_file(str(path), Target())
    assert captured.frontend == "structure"
    (note,) = captured.notes
    assert note.startswith("fake-tensor capture failed (") and "a limit of the scan (fake tensors cannot run it)" \
        in note and f"not run eagerly, since {why}" in note
    assert captured.skipped == ["the forward did not run: only module-structure checks ran"]
    assert [a["op"] for a in captured.graph.nodes.values()] == ["linear"]


# --------------------------------------------------------------------------- Hugging Face configs
def _blenderbot(tmp_path, **sizes):
    """BlenderbotForCausalLM with a decoder deeper than its encoder: transformers sizes the cache
    by the encoder's layers (``num_hidden_layers``), and the decoder's fourth layer indexes past
    it: the forward raises IndexError on any tensors (its default config does this at 24/2). Its
    weights take over 1 MiB; a small build's (vocabulary 512) less."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BlenderbotConfig(d_model=64, encoder_attention_heads=4, decoder_attention_heads=4,
                                           encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=8000,
                                           max_position_embeddings=128, **sizes)
    config.architectures = ["BlenderbotForCausalLM"]
    config.save_pretrained(tmp_path)
    return str(tmp_path)


@pytest.mark.parametrize("budget, how", [
    (None, "it fails eagerly on real tensors too"),
    (1 << 20, "a small build of its config fails the same way, and eagerly on real tensors too"),
])
def test_a_configs_own_error_is_named_after_a_real_run_fails_too(tmp_path, monkeypatch, budget, how):
    if budget is not None:
        monkeypatch.setattr(pytorch, "eager_budget", lambda: budget)
    directory = _blenderbot(tmp_path, encoder_layers=2, decoder_layers=6)
    with pytest.raises(CaptureError) as failed:
        capture_file(directory, Target())
    assert str(failed.value) == (f"{directory}: the forward failed on the example inputs: IndexError: list index out "
                                 f"of range (the model's own error, not the scan's: {how}; on inputs generated for "
                                 "it: --input-shape or --inputs module:callable give others)")


def test_a_small_build_that_runs_makes_the_fake_failure_the_scans_and_the_structure_the_capture(
        tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    forward = transformers.BlenderbotForCausalLM.forward

    def plain_only(self, input_ids=None, **kwargs):  # what fake tensors cannot pass, real ones can
        if type(input_ids) is not torch.Tensor:
            raise RuntimeError("plain tensors only")
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(transformers.BlenderbotForCausalLM, "forward", plain_only)
    monkeypatch.setattr(pytorch, "eager_budget", lambda: 1 << 20)
    captured = capture_file(_blenderbot(tmp_path, encoder_layers=4, decoder_layers=4), Target())
    assert captured.frontend == "structure"
    (note,) = captured.notes
    assert note == ("fake-tensor capture failed (RuntimeError: plain tensors only), a limit of the scan (a small "
                    "build of its config fails the same way on fake tensors and runs on real ones); not run eagerly, "
                    "since its weights take 2.8 MiB, more than the 1.0 MiB a real run may take here")


def test_a_small_config_keeps_the_code_paths_and_shrinks_the_rest():
    transformers = pytest.importorskip("transformers")
    deepseek = small_config(transformers.DeepseekV3Config())
    assert (deepseek.n_routed_experts, deepseek.num_experts_per_tok, deepseek.n_group) == (16, 8, 8)
    assert deepseek.num_hidden_layers == 4 and deepseek.first_k_dense_replace == 3  # a MoE layer stays
    assert (deepseek.moe_intermediate_size, deepseek.intermediate_size, deepseek.vocab_size) == (128, 128, 512)
    assert (deepseek.hidden_size, deepseek.num_attention_heads, deepseek.qk_rope_head_dim) == (7168, 128, 64)
    blender = small_config(transformers.BlenderbotConfig(encoder_layers=2, decoder_layers=24))
    assert (blender.encoder_layers, blender.decoder_layers) == (2, 3)  # the decoder stays deeper
    hybrid = transformers.Qwen3NextConfig()
    small = small_config(hybrid)
    assert set(small.layer_types) == set(hybrid.layer_types) and len(small.layer_types) == small.num_hidden_layers < 8


def test_a_count_naming_every_layer_still_does_in_the_small_config():
    """Gemma 4's assistant shares every layer's KV cache (num_kv_shared_layers == num_hidden_layers):
    cut to 30 -> 6 layers with 30 shared, its config raised, so its fake failure was never checked."""
    transformers = pytest.importorskip("transformers")
    qwen = small_config(transformers.Qwen2Config(num_hidden_layers=24, max_window_layers=24))
    assert qwen.max_window_layers == qwen.num_hidden_layers == 2  # every layer still slides
    kept = small_config(transformers.Qwen2Config(num_hidden_layers=24, max_window_layers=20))
    assert kept.max_window_layers == 20  # a count of some layers is not a count of all
