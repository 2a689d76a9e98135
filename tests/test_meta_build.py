"""A scan builds every model with no weight allocated (runtime/pytorch/meta_build.py, issue 44):
fused-experts constructors that allocate for real under accelerate's ``init_empty_weights``
build on meta, and the small tables a constructor computes keep their values."""
import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, findings_of, sample

from precisionaudit.capture.pytorch.capture import buffer_ranges, capture_file
from precisionaudit.core.numerics import Target
from precisionaudit.runtime.pytorch import model_file
from precisionaudit.runtime.pytorch.meta_build import VALUE_LIMIT, large_tensors_on_meta
from precisionaudit.runtime.pytorch.model_file import build_without_weights

#: 4 layers of 256 fused experts at DeepSeek-V3's widths: 4 * 256 * 3 * 2048 * 7168 fp32 = 169 GiB
FUSED_EXPERTS = """
import torch
from torch import nn

class Experts(nn.Module):
    def __init__(self, experts=256, hidden=7168, inter=2048):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(experts, 2 * inter, hidden))
        self.down_proj = nn.Parameter(torch.empty(experts, hidden, inter))
        nn.init.normal_(self.gate_up_proj, std=0.02)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x):  # the first expert's MLP: enough to run the fused weights
        gate, up = (x @ self.gate_up_proj[0].t()).chunk(2, dim=-1)
        return (torch.nn.functional.silu(gate) * up) @ self.down_proj[0].t() * self.inv_freq.max()

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Experts() for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x.float()

def get_model():
    return Model().eval()

def get_example_inputs():
    return (torch.randn(1, 16, 7168),)
"""


def _scan_in_a_subprocess(path, *args):
    """(report, peak RSS in MiB) of ``precisionaudit scan PATH --format json`` in a fresh process,
    its address space limited to 12 GiB: an allocation of the weights fails on any machine."""
    code = ("import json, resource, subprocess, sys;"
            "resource.setrlimit(resource.RLIMIT_AS, (12 << 30, 12 << 30));"
            f"p = subprocess.run([sys.executable, '-m', 'precisionaudit', 'scan', {path!r}, '--format', 'json',"
            f" *{list(args)!r}], capture_output=True, text=True);"
            "sys.stderr.write(p.stderr); print(p.returncode);"
            "print(json.dumps(json.loads(p.stdout)) if p.stdout.strip() else 'null');"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    rc, report, rss = out.stdout.strip().split("\n")[-3:]
    assert rc in ("0", "1"), out.stderr[-2000:]
    return json.loads(report), int(rss)


def test_a_fused_experts_constructor_that_would_allocate_169_gib_builds_on_meta_and_scans(tmp_path):
    path = tmp_path / "fused_experts.py"
    path.write_text(FUSED_EXPERTS)
    report, rss = _scan_in_a_subprocess(str(path))
    (model,) = report["models"]
    assert (model["status"], model["frontend"]) == ("ok", "fake") and model["nodes"] > 10
    assert rss < 2048, rss


def test_a_deepseek_v3_sized_config_scans_under_4_gib(tmp_path):
    """DeepSeek-V3 at its real widths (256 experts of 2048 x 7168, 7168 hidden, MLA), six layers
    (three of them MoE: 34 B parameters, 135 GB in fp32), as a Hugging Face directory."""
    transformers = pytest.importorskip("transformers")
    config = transformers.DeepseekV3Config(num_hidden_layers=6)
    config.architectures = ["DeepseekV3ForCausalLM"]
    config.save_pretrained(tmp_path)
    report, rss = _scan_in_a_subprocess(str(tmp_path))
    (model,) = report["models"]
    assert (model["status"], model["frontend"]) == ("ok", "fake") and not model["notes"]
    assert rss < 4096, rss


def test_small_factory_tensors_keep_their_values_and_large_ones_go_to_meta():
    with large_tensors_on_meta():
        table = torch.arange(0, 64, 2).float()
        big = torch.empty(VALUE_LIMIT + 1)
        schedule = torch.linspace(0, 0.1, 4).tolist()
        placed = torch.zeros(VALUE_LIMIT + 1, device="cpu")  # a device given: as written
    assert table.device.type == "cpu" and table[-1].item() == 62.0
    assert big.device.type == "meta" and placed.device.type == "cpu"
    assert schedule == pytest.approx([0.0, 1 / 30, 2 / 30, 0.1])
    assert torch.empty(VALUE_LIMIT + 1).device.type == "cpu"  # the mode is gone


def test_a_factory_call_that_fails_raises_the_callers_own_error():
    with large_tensors_on_meta(), pytest.raises(TypeError, match="empty"):
        torch.empty(None, 3, 4)  # transformers' Dots1 default config: n_routed_experts is None


def test_rotary_tables_keep_their_values_and_findings_under_the_meta_build(monkeypatch):
    """PA113 reads the rotary inv_freq the constructor computed: the same buffer ranges and
    findings as the build before issue 44 (accelerate's init_empty_weights alone)."""
    path = sample("pa113_rotary_buffer_hazard.py")
    target = Target("float16", "pure")
    graph = capture_file(path, target).graph
    now = findings_of(path, mode="pure")
    from accelerate import init_empty_weights

    monkeypatch.setattr(model_file, "empty_build", lambda: init_empty_weights(include_buffers=False))
    before = capture_file(path, target).graph
    assert graph.graph["built_buffer_ranges"] == before.graph["built_buffer_ranges"] != {}
    assert graph.graph["buffer_ranges"] == before.graph["buffer_ranges"]
    assert [(f.rule, f.module, f.message) for f in now] == [
        (f.rule, f.module, f.message) for f in findings_of(path, mode="pure")]
    assert "PA113" in {f.rule for f in now}


def test_an_inv_freq_buffer_is_real_and_summarised_after_the_meta_build():
    class Rotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4096, 4096)  # 16 M elements: meta before registration
            self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 128, 2).float() / 128)),
                                 persistent=False)
            self.register_buffer("mask", torch.ones(2048, 2048).tril(), persistent=False)  # 4 M: meta

    model, note = build_without_weights(Rotary, "m.py", "get_model")
    assert note is None and model.proj.weight.device.type == "meta" and model.mask.device.type == "meta"
    assert buffer_ranges(model) == {"inv_freq": pytest.approx((1e-4 / 10000 ** (-2 / 128), 1.0))}


def test_a_constructors_own_error_is_named_as_the_models():
    def broken():
        return torch.nn.Parameter(torch.empty(None, 4))

    with pytest.raises(Exception, match=r"get_model\(\) raised TypeError: .*\(the model's own error, not the "
                                        r"scan's\)"):
        build_without_weights(broken, "m.py", "get_model")


def test_a_constructor_that_reads_a_large_tensor_builds_with_init_empty_weights_and_says_so():
    class ReadsLarge(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.widths = int(torch.ones(VALUE_LIMIT + 1).sum())  # reads a value of a large tensor

    model, note = build_without_weights(ReadsLarge, "m.py", "get_model")
    assert model.widths == VALUE_LIMIT + 1 and model.lin.weight.device.type == "meta"
    assert note.startswith("built with its large tensors allocated: without them the constructor failed")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="an address-space limit needs Linux")
def test_running_out_of_memory_while_building_is_not_the_models_error():
    code = ("import resource, torch; from precisionaudit.runtime.pytorch.model_file import build_without_weights\n"
            "resource.setrlimit(resource.RLIMIT_AS, (int(open('/proc/self/statm').read().split()[0]) * 4096"
            " + (1 << 30),) * 2)\n"
            "try:\n    build_without_weights(lambda: torch.zeros(1 << 31, device='cpu'), 'm.py', 'get_model')\n"
            "except Exception as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.stdout.startswith("m.py: building get_model ran out of memory"), out.stdout + out.stderr[-2000:]
    assert "the model's own error" not in out.stdout


def test_a_constructor_that_imports_a_missing_package_says_so_not_that_the_model_is_broken():
    """Gemma3n's vision tower imports timm's wrapper, which needs PIL: the environment's, not
    the model's nor the scan's."""
    def needs_a_package():
        import not_installed_anywhere  # noqa: F401
        return torch.nn.Linear(2, 2)

    with pytest.raises(Exception, match=r"get_model\(\) raised ModuleNotFoundError: No module named "
                                        r"'not_installed_anywhere' \(a package the model imports is not installed "
                                        r"here\)"):
        build_without_weights(needs_a_package, "m.py", "get_model")
