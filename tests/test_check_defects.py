"""Reproductions of defects of the fix-and-prove loop (issue 13): each model here broke
``check`` or ``apply_plan`` before the fix."""
import json
import math
import os
import textwrap
import threading

import pytest
import torch
from torch import nn

from precisionaudit.apply.pytorch import apply_plan, to_low_precision
from precisionaudit.runtime.pytorch.emulation import EmulatedKernels


def model_file(tmp_path, body, name="model.py"):
    path = tmp_path / name
    path.write_text("import math\nimport torch\nfrom torch import nn\n" + textwrap.dedent(body))
    return path


def plan_file(tmp_path, text, name="amp_plan.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def check_json(cli, *args):
    result = cli("check", *args, "--format", "json")
    assert result.stdout.startswith("{"), result.output
    return result, json.loads(result.stdout)


NORMS = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 64)
        self.norm = {norm}
        self.down = nn.Linear(64, 8)

    def forward(self, x):
        return self.down(self.norm(self.up(x) * 300)).float()

def get_model():
    return Net()

def get_example_inputs():
    return (torch.randn(4, 64),)
"""


@pytest.mark.parametrize("norm,op", [("nn.LayerNorm(64)", "layer_norm"), ("nn.GroupNorm(4, 64)", "group_norm")])
def test_pure_mode_norm_kept_in_fp32_hands_the_next_gemm_the_low_dtype(cli, tmp_path, norm, op):
    path = model_file(tmp_path, NORMS.format(norm=norm))
    plan = plan_file(tmp_path, f"""\
        version: 1
        target: {{dtype: float16, mode: pure, device: cuda}}
        overrides:
          - module: norm
            ops: [{op}]
        keep_fp32_modules: [norm]
        """)
    result, report = check_json(cli, path, "--mode", "pure", "--plan", plan)
    planned = report["variants"][2]
    assert planned["error"] is None and planned["status"] == "ok", planned["error"]


def test_pure_mode_region_output_is_the_surrounding_dtype_with_fp32_weights():
    net = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    plan = {"version": 1, "target": {"dtype": "float16", "mode": "pure"},
            "overrides": [{"module": "1", "ops": ["layer_norm"]}], "keep_fp32_modules": ["1"]}
    to_low_precision(net, plan)
    seen = {}
    net[2].register_forward_pre_hook(lambda m, args: seen.update(dtype=args[0].dtype))
    with apply_plan(net, plan, compilable=False):
        net(torch.randn(3, 8, dtype=torch.float16))
    assert net[1].weight.dtype == torch.float32 and seen["dtype"] == torch.float16


ROTARY = """
class Rotary(nn.Module):
    '''cos/sin tables cached as plain attributes on first use (not buffers).'''
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            t = torch.arange(x.shape[1], dtype=self.inv_freq.dtype)
            freqs = torch.cat([torch.outer(t, self.inv_freq)] * 2, dim=-1)
            self.cache = (freqs.cos(), freqs.sin())
        cos, sin = self.cache
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.rotary = Rotary(16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(self.rotary(self.inp(x))).float()

def get_model():
    return Net()

def get_example_inputs():
    return (torch.randn(2, 12, 16),)
"""


def test_pure_variant_is_converted_before_the_reference_fills_plain_attribute_caches(cli, tmp_path):
    path = model_file(tmp_path, ROTARY)
    result, report = check_json(cli, path, "--mode", "pure")
    base = report["variants"][1]
    assert base["error"] is None and base["status"] == "ok" and result.exit_code == 0


MASKS = """
class Net(nn.Module):
    '''A causal mask built with full(-inf) and an uninitialised buffer that is filled:
    both identical in the reference; the real divergence is exp overflowing in fp16.'''
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        n = x.shape[1]
        mask = torch.full((n, n), float("-inf"), dtype=x.dtype).triu(1)
        scratch = torch.empty(n, n, dtype=x.dtype)
        scratch.zero_()
        scores = self.proj(x) @ x.transpose(-1, -2) + mask + scratch
        e = torch.exp(scores * 4)
        return (e / e.sum(-1, keepdim=True)).float()

def get_model():
    return Net()

def get_example_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 8, 16) * 2,)
"""


def test_first_divergence_is_the_op_whose_inputs_agree_and_output_diverges(cli, tmp_path):
    path = model_file(tmp_path, MASKS)
    result, report = check_json(cli, path, "--mode", "pure")
    first = report["variants"][1]["first_divergence"]
    assert report["variants"][1]["status"] == "nonfinite"
    assert first["op"] == "exp" and first["kind"] == "nonfinite", first


def test_an_op_fed_a_diverged_value_is_not_the_first_divergence():
    from precisionaudit.check.pytorch.divergence import Probe
    from precisionaudit.check.tolerance import tolerance_for

    class Chain(nn.Module):
        def forward(self, x):
            return torch.exp(x * 1.0).neg()

    tol = tolerance_for("float16")
    net = Chain()
    with Probe(net, tol) as ref:
        net(torch.full((4,), 12.0))
    with Probe(net, tol, ref) as run:
        net(torch.full((4,), 12.0, dtype=torch.float16))
    first = run.first_divergence()
    assert (first["op"], first["kind"]) == ("exp", "nonfinite")


WIDE_GRADS = """
class Net(nn.Module):
    '''Two heads whose gradients are 2^40 apart: no fp16 loss scale holds both.'''
    def __init__(self):
        super().__init__()
        self.big = nn.Linear(32, 32)
        self.small = nn.Linear(32, 32)

    def forward(self, x):
        return self.big(x) * 3e4, self.small(x) * 1e-7

def get_model():
    return Net()

def get_example_inputs():
    return (torch.randn(8, 32),)
"""


def test_grad_warns_when_no_loss_scale_keeps_the_gradients_in_range(cli, tmp_path):
    path = model_file(tmp_path, WIDE_GRADS)
    result, report = check_json(cli, path, "--grad")
    g = report["gradients"]
    lost = g["underflow_fp16"]["recommended"]
    assert g["max_abs"] * g["recommended_init_scale"] < 65504  # no overflow at the advice
    assert lost["zero"] + lost["subnormal"] > 0.2
    assert "no float16 loss scale keeps these gradients in range" in g["warning"]
    assert g["warning"] in report["warnings"] and "bfloat16" in g["warning"]


def test_grad_gives_no_warning_when_the_scale_keeps_gradients_in_range(cli, tmp_path):
    path = model_file(tmp_path, WIDE_GRADS.replace("* 1e-7", "* 1.0").replace("* 3e4", "* 1.0"))
    result, report = check_json(cli, path, "--grad")
    g = report["gradients"]
    lost = g["underflow_fp16"]["recommended"]
    assert lost["zero"] + lost["subnormal"] <= 0.01 and "warning" not in g


def test_check_reads_the_settings_file_and_honours_config_and_isolated(cli, tmp_path, monkeypatch):
    path = model_file(tmp_path, ROTARY)
    (tmp_path / "pyproject.toml").write_text('[tool.precisionaudit]\ndtype = "bfloat16"\nmode = "pure"\n')
    other = tmp_path / "other.toml"
    other.write_text('dtype = "float16"\n')
    monkeypatch.chdir(tmp_path)
    _, report = check_json(cli, path)
    assert report["target"]["dtype"] == "bfloat16" and report["target"]["mode"] == "pure"
    _, report = check_json(cli, path, "--isolated")
    assert (report["target"]["dtype"], report["target"]["mode"]) == ("float16", "autocast")
    _, report = check_json(cli, path, "--config", other)
    assert (report["target"]["dtype"], report["target"]["mode"]) == ("float16", "autocast")
    _, report = check_json(cli, path, "--dtype", "float16")  # the command line wins
    assert (report["target"]["dtype"], report["target"]["mode"]) == ("float16", "pure")
    bad = tmp_path / "bad.toml"
    bad.write_text('dtype = "float4"\n')
    result = cli("check", path, "--config", bad)
    assert result.exit_code == 2 and result.stderr.startswith("precisionaudit: error: ")


# --------------------------------------------------------------------------- apply_plan
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        self.seen = torch.exp(self.proj(x) * 40).dtype
        return torch.exp(self.proj(x) * 40)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.gate = Gate()

    def forward(self, x):
        return self.gate(self.inp(x)).sum(-1)


EXP_PLAN = {"version": 1, "target": {"dtype": "bfloat16", "mode": "autocast"},
            "overrides": [{"module": "gate", "ops": ["exp"]}]}


@pytest.mark.parametrize("order", ["plan_then_compile", "compile_then_plan"])
def test_apply_plan_works_under_torch_compile(order):
    torch.manual_seed(0)
    model, x = Outer(), torch.randn(4, 8)
    eager = Outer()
    eager.load_state_dict(model.state_dict())
    with apply_plan(eager, EXP_PLAN), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = eager(x)
    if order == "plan_then_compile":
        handle = apply_plan(model, EXP_PLAN)
        compiled = torch.compile(model, backend="eager")
    else:
        compiled = torch.compile(model, backend="eager")
        handle = apply_plan(compiled, EXP_PLAN)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(2):
            got = compiled(x)
    assert model.gate.seen == torch.float32 and handle.hits[0] == 4
    assert torch.equal(got, expected)
    handle.remove()
    assert "forward" not in model.gate.__dict__


class Rendezvous(nn.Module):
    """Holds thread "a" inside the planned region until thread "b" is inside it too, and
    thread "b" until "a" has left: the two regions overlap, "a"'s opening first and closing
    first (what a shared per-module stack gets wrong: "a" closes "b"'s region)."""

    def __init__(self):
        super().__init__()
        self.a_in, self.b_in, self.a_out = threading.Event(), threading.Event(), threading.Event()
        self.seen = {}

    def forward(self, x):
        name = threading.current_thread().name
        if name == "a":
            self.a_in.set()
            assert self.b_in.wait(10)
        else:
            self.b_in.set()
            assert self.a_out.wait(10)
        y = torch.exp(x * 1.0)
        self.seen[name] = y.dtype
        return y


def test_apply_plan_keeps_each_threads_regions_apart():
    """Two threads inside the same fp32 region at once, one with bf16 activations, one with
    fp16: each gets its own activations' dtype back (a stack shared between threads handed
    thread "a" the region state of thread "b")."""
    model = nn.Sequential(nn.Identity(), Rendezvous())
    gate = model[1]
    plan = {"version": 1, "target": {"dtype": "float16", "mode": "pure"}, "overrides": [{"module": "1"}]}
    handle = apply_plan(model, plan, compilable=False)
    errors, out = [], {}
    dtypes = {"a": torch.bfloat16, "b": torch.float16}

    def work():
        name = threading.current_thread().name
        try:
            if name == "b":
                assert gate.a_in.wait(10)
            out[name] = model(torch.ones(4, dtype=dtypes[name])).dtype
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            if name == "a":
                gate.a_out.set()

    threads = [threading.Thread(target=work, name=n) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    handle.remove()
    assert not errors, errors
    assert gate.seen == {"a": torch.float32, "b": torch.float32}, gate.seen
    assert out == dtypes and handle.hits[0] == 2


def test_pure_region_keeps_nan_payloads_of_buffers_bit_identical():
    class Stats(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.zeros(4))

        def forward(self, x):
            return x * self.table.nan_to_num(0.0).sum() + x

    net = Stats().half()
    payload = torch.tensor([0x7E01, 0x7C01, 0x3C00, 0xFE3F - 0x10000], dtype=torch.int16).view(torch.float16)
    net.table.copy_(payload)
    before = net.table.view(torch.int16).clone()
    plan = {"version": 1, "target": {"dtype": "float16", "mode": "pure"}, "overrides": [{"module": ""}]}
    with apply_plan(net, plan, compilable=False):
        net(torch.randn(3, dtype=torch.float16))
    assert torch.equal(net.table.view(torch.int16), before)


# --------------------------------------------------------------------------- CUDA vs CPU kernels
def test_emulation_raises_where_cuda_refuses_an_unrepresentable_where_scalar():
    x, mask = torch.zeros(4, dtype=torch.float16), torch.tensor([True, False, True, False])
    assert torch.isinf(torch.where(mask, x, -1e9)).any()  # what CPU does by itself
    with EmulatedKernels(), pytest.raises(RuntimeError, match="without overflow"):
        torch.where(mask, x, -1e9)
    with EmulatedKernels():  # representable scalars and -inf are fine
        assert torch.where(mask, x, float("-inf")).dtype == torch.float16
        assert torch.where(mask, x, -6e4)[1] == -6e4


def test_the_probe_records_only_the_models_ops_not_its_own_arithmetic():
    """The probe measures module outputs in forward hooks, inside its own op tap: its abs/max/
    isfinite were recorded as the model's ops, and a variant's 'max' was then compared with
    the reference's (another) 'max' and named the first divergence."""
    from precisionaudit.check.pytorch.divergence import Probe
    from precisionaudit.check.tolerance import tolerance_for

    net, tol = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), tolerance_for("float16")
    x = torch.randn(3, 4)
    with Probe(net, tol) as ref:
        net(x)
    x = x.half() * 1e4
    net.half()
    with Probe(net, tol, ref) as run:
        net(x)
    assert {op for _, op, _ in ref.ops} == {"linear", "tanh"}
    assert {op for _, op in run.op_counts} == {"linear", "tanh"}


def test_a_planned_factory_op_asked_for_the_low_dtype_runs_in_fp32():
    """arange(n, dtype=x.dtype) in a pure bf16 model: positions past 256 collide in bf16.
    Planned, it makes fp32 positions (exact), and the region hands bf16 back at its end."""
    class Positions(nn.Module):
        def forward(self, x):
            t = torch.arange(x.shape[0], dtype=x.dtype)
            self.inner = t
            return t * 1.0

    model = Positions()
    plan = {"version": 1, "target": {"dtype": "bfloat16", "mode": "pure"},
            "overrides": [{"module": "", "ops": ["arange"]}]}
    with apply_plan(model, plan, compilable=False) as handle:
        out = model(torch.zeros(1000, dtype=torch.bfloat16))
    assert model.inner.dtype == torch.float32 and torch.equal(model.inner, torch.arange(1000.0))
    assert out.dtype == torch.bfloat16 and handle.hits[0] == 1


def test_autocast_variants_build_their_own_plain_attribute_caches(cli):
    """Autocast variants shared the fp32 model: a cos/sin cache built from positions in
    x.dtype by the reference run (fp32, exact) was reused by the baseline, which never made
    its own bf16 positions (colliding past 256) and passed."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demos", "rotary_positions.py")
    result, report = check_json(cli, path, "--dtype", "bfloat16")
    assert report["variants"][1]["status"] == "exceeds_tolerance" and result.exit_code == 1
    assert report["variants"][1]["first_divergence"]["module"] == "rotary"
