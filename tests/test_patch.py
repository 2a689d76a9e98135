"""apply_plan: regions run in fp32 under autocast and in pure-half models; parameters stay
untouched; removing the handle brings the original forward back exactly."""
import math

import pytest
import torch
from torch import nn

import precisionaudit
from precisionaudit.apply.pytorch import (
    PlanWarning,
    apply_plan,
    matches,
    to_low_precision,
)
from precisionaudit.check.pytorch.flops import GemmFlops
from precisionaudit.plan.file import PlanError
from precisionaudit.runtime.pytorch.cuda_autocast import emulated_cuda_autocast


def plan(*overrides, **target):
    return {"version": 1, "target": target, "overrides": list(overrides)}


class Attention(nn.Module):
    """Scores in fp16 under autocast, a -1e9 mask, and two GEMMs (qkv, attn @ v)."""

    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.seen = {}

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, -1e9)
        self.seen["masked"] = scores.dtype
        return scores.softmax(-1) @ v


class Net(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.blocks = nn.ModuleList(Attention(dim) for _ in range(2))
        self.out = nn.Linear(dim, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.out(x)


class Gate(nn.Module):
    """A hand-written softmax: exp overflows fp16 above 11.09."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        e = torch.exp(x)
        self.seen["exp"] = e.dtype
        return e / e.sum(-1, keepdim=True)


MASK_PLAN = plan({"module": "blocks.*", "ops": ["masked_fill"]})


def _net():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(2, 5, 16)


def test_planned_masked_fill_runs_under_autocast_where_the_baseline_raises():
    model, x = _net()
    with emulated_cuda_autocast(torch.float16):
        with pytest.raises(RuntimeError, match="overflow"):
            model(x)
        with apply_plan(model, MASK_PLAN):
            y = model(x)
    assert torch.isfinite(y).all() and model.blocks[0].seen["masked"] == torch.float32


def test_op_level_region_keeps_the_gemms_in_fp16():
    model, x = _net()
    with emulated_cuda_autocast(torch.float16), apply_plan(model, MASK_PLAN), GemmFlops() as flops:
        model(x)
    assert set(flops.by_dtype) == {"float16"}


def test_whole_module_entry_runs_its_gemms_in_fp32():
    model, x = _net()
    whole_first = plan({"module": "blocks.0"}, {"module": "blocks.1", "ops": ["masked_fill"]})
    with emulated_cuda_autocast(torch.float16), apply_plan(model, whole_first), GemmFlops() as flops:
        model(x)
    assert flops.by_dtype["float32"] > 0 and flops.by_dtype["float16"] > 0


def test_state_dict_is_bit_identical_after_apply_and_a_planned_forward():
    model, x = _net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with emulated_cuda_autocast(torch.float16), apply_plan(model, MASK_PLAN):
        model(x)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and before[k].dtype == after[k].dtype for k in before)


def test_remove_restores_the_original_forward_exactly():
    model, x = _net()
    original = model(x)
    handle = apply_plan(model, plan({"module": "blocks.*"}, {"module": "out", "ops": ["linear"]}))
    patched = model(x.half().float() + 1e-3)  # run it patched once, with other values
    handle.remove()
    hooks = [h for m in model.modules() for h in (m._forward_hooks, m._forward_pre_hooks) if h]
    assert torch.equal(model(x), original) and not hooks and patched is not None


def test_pure_half_exp_overflow_is_fixed_and_the_output_dtype_kept():
    gate = Gate().half()
    x = torch.tensor([[12.0, 0.0, -3.0]]).half()  # exp(12) = 162755 > 65504
    assert torch.isnan(gate(x)).any()
    with apply_plan(gate, plan({"module": "", "ops": ["exp"]})):
        y = gate(x)
    assert y.dtype == torch.float16 and torch.allclose(y.float(), torch.softmax(x.float(), -1), atol=1e-3)


def test_unplanned_gemm_receives_the_region_result_in_the_low_dtype_in_pure_models():
    class ExpThenLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(torch.exp(x) / 1e5)  # fp16 weights: an fp32 input would raise

    model = ExpThenLinear().half()
    with apply_plan(model, plan({"module": "", "ops": ["exp"]})):
        y = model(torch.tensor([[12.0, 1.0, 0.0]]).half())
    assert y.dtype == torch.float16 and torch.isfinite(y).all()


def test_whole_module_region_in_a_pure_model_keeps_batchnorm_running_stats_updating():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).half().train()
    before = model[1].running_mean.clone()
    with apply_plan(model, plan({"module": "1"})):
        y = model(torch.randn(8, 4).half())
    assert y.dtype == torch.float16 and not torch.equal(before, model[1].running_mean)
    assert model[1].running_mean.dtype == torch.float16


def test_whole_module_region_ignores_casts_down_written_inside_it():
    class CastsDown(nn.Module):
        def forward(self, x):
            return (x.half() * 1000).float()  # 1000 * 100 overflows fp16

    with apply_plan(CastsDown(), plan({"module": ""})) as handle:
        y = handle.model(torch.full((2,), 100.0))
    assert torch.equal(y, torch.full((2,), 100000.0))


@pytest.mark.parametrize("name", ["torch.exp", "exp", "Tensor.exp"])
def test_op_names_are_matched_canonically(name):
    gate = Gate().half()
    with apply_plan(gate, plan({"module": "", "ops": [name]})):
        gate(torch.zeros(1, 3).half())
    assert gate.seen["exp"] == torch.float32


def test_entries_that_match_nothing_are_reported():
    model, _ = _net()
    with pytest.warns(PlanWarning, match="encoder"):
        handle = apply_plan(model, plan({"module": "encoder.*", "ops": ["softmax"]},
                                        {"module": "blocks.*", "ops": ["masked_fill"]}))
    assert [o.module for o in handle.unmatched] == ["encoder.*"] and handle.matched[1] == ["blocks.0", "blocks.1"]


def test_op_entries_whose_ops_never_ran_are_reported_after_a_forward():
    model, x = _net()
    handle = apply_plan(model, plan({"module": "blocks.*", "ops": ["cumsum"]}, {"module": "out", "ops": ["linear"]}))
    model(x)
    assert [o.module for o in handle.unused_ops()] == ["blocks.*"]


@pytest.mark.parametrize("pattern,path,expected", [
    ("blocks.*.attn", "blocks.3.attn", True),
    ("blocks.*.attn", "blocks.3.inner.attn", False),
    ("blocks.**.attn", "blocks.3.inner.attn", True),
    ("", "", True),
    ("", "blocks", False),
    ("*", "", False),
])
def test_module_globs_match_one_component_per_star(pattern, path, expected):
    assert matches(pattern, path) is expected


@pytest.mark.parametrize("bad,message", [
    ({"version": 2, "overrides": []}, "version 2 is not supported"),
    ({"overrides": []}, "no version"),
    ({"version": 1, "overrides": [{"module": "a", "opz": ["x"]}]}, r"overrides\[0\] \(module 'a'\): unknown key opz"),
    ({"version": 1, "overrides": [{"module": "a", "ops": "softmax"}]}, "ops must be a non-empty list"),
    ({"version": 1, "overrides": [{"module": "a", "dtype": "float16"}]}, "dtype 'float16' is not supported"),
    ({"version": 1, "target": {"dtype": "float4"}, "overrides": []}, "target dtype 'float4'"),
    ({"version": 1, "overrides": {"module": "a"}}, "overrides must be a list"),
])
def test_invalid_plans_are_rejected_with_the_offending_entry(bad, message):
    with pytest.raises(PlanError, match=message):
        apply_plan(nn.Linear(2, 2), bad)


@pytest.mark.parametrize("text,message", [
    ("version: 1\noverrides:\n  - module: [unclosed\n", r"amp_plan.yaml: not valid YAML \(line \d+\)"),
    ("- module: blocks.*\n", r"amp_plan.yaml: a plan is a mapping"),
])
def test_a_malformed_plan_file_is_named(tmp_path, text, message):
    path = tmp_path / "amp_plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError, match=message):
        precisionaudit.apply_plan(nn.Linear(2, 2), str(path))


def test_plan_error_is_exported_beside_apply_plan():
    """docs/plan-and-check.md documents PlanError with apply_plan: callers catch it from the package."""
    assert precisionaudit.PlanError is PlanError and issubclass(precisionaudit.PlanError, ValueError)
    with pytest.raises(precisionaudit.PlanError, match="version"):
        precisionaudit.apply_plan(nn.Linear(2, 2), {"version": 99, "overrides": []})


def test_to_low_precision_keeps_the_named_modules_in_fp32():
    model = to_low_precision(nn.Sequential(nn.Linear(2, 2), nn.LSTM(2, 2)),
                             plan(dtype="bfloat16", mode="pure") | {"keep_fp32_modules": ["1"]})
    assert model[0].weight.dtype == torch.bfloat16 and model[1].weight_ih_l0.dtype == torch.float32


class TwoGemms(nn.Module):
    """Attention's two GEMMs: logits = q @ k^T (4x8 @ 8x4) and probs @ v (4x4 @ 4x8)."""

    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v


def _two_gemm_inputs():
    torch.manual_seed(0)
    return [torch.randn(4, 8) for _ in range(3)]


@pytest.mark.parametrize("ops,fp32_flops", [(["matmul#1"], 2 * 4 * 8 * 4), (["matmul#2"], 2 * 4 * 4 * 8),
                                             (["matmul"], 2 * 4 * 8 * 4 + 2 * 4 * 4 * 8)])
def test_a_numbered_op_plans_only_that_call_of_the_module(ops, fp32_flops):
    with emulated_cuda_autocast(torch.float16), apply_plan(TwoGemms(), plan({"module": "", "ops": ops})) as h, \
            GemmFlops() as flops:
        h.model(*_two_gemm_inputs())
    assert flops.by_dtype["float32"] == fp32_flops and h.hits[0] == len(ops) * (2 if ops == ["matmul"] else 1)


def test_a_numbered_op_counts_again_at_each_call_of_the_module():
    model = nn.ModuleList([TwoGemms()])
    with emulated_cuda_autocast(torch.float16), apply_plan(model, plan({"module": "0", "ops": ["matmul#1"]})) as h, \
            GemmFlops() as flops:
        for _ in range(3):
            model[0](*_two_gemm_inputs())
    assert flops.by_dtype["float32"] == 3 * 2 * 4 * 8 * 4 and h.hits[0] == 3


@pytest.mark.parametrize("op", ["matmul#0", "matmul#x", "#1"])
def test_a_bad_call_number_is_rejected(op):
    with pytest.raises(PlanError, match="call number"):
        apply_plan(TwoGemms(), plan({"module": "", "ops": [op]}))


def test_a_gemm_gets_the_low_dtype_of_its_weights_when_a_region_made_its_input_fp32_by_a_cast():
    """``w.to(x.dtype)`` of a region-made fp32 ``x`` keeps fp32 (DeepSeek's MoE routing
    weights): without the plan ``w`` is fp16 and the expert's Linear reads fp16. Model
    code still sees the dtypes it sees today (x is fp32)."""
    class Routed(nn.Module):
        def __init__(self):
            super().__init__()
            self.expert = nn.Linear(4, 4)
            self.seen = {}

        def forward(self, x, gate):
            x = x * 16.0  # planned: fp32 from here on
            w = torch.softmax(gate, -1, dtype=torch.float32).to(x.dtype)
            self.seen.update(x=x.dtype, w=w.dtype)
            return self.expert(w * x)

    model = Routed().half()
    x, gate = torch.full((2, 4), 5000.0).half(), torch.zeros(2, 4).half()
    with apply_plan(model, plan({"module": "", "ops": ["mul"]}, dtype="float16", mode="pure")):
        y = model(x, gate)
    assert model.seen == {"x": torch.float32, "w": torch.float32}
    assert y.dtype == torch.float16 and torch.isfinite(y).all()


def test_a_region_does_not_lower_a_result_autocast_keeps_in_fp32():
    """FAVOR+'s feature map: exp's result is fp32 under autocast; a planned module around it
    hands it on in fp32, not rounded to fp16 (where 1e-9 flushes to 0)."""
    class FeatureMap(nn.Module):
        def forward(self, x):
            return torch.exp((x * x).sum(-1, keepdim=True) * -1.0) / 8.0

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = FeatureMap()

        def forward(self, x):
            return self.features(x)

    x = torch.full((1, 3), 2.6, dtype=torch.float16)  # a Linear's output; exp(-20.3) / 8 = 1.9e-10: 0 in fp16
    with emulated_cuda_autocast(torch.float16):
        without = Model()(x)
        with apply_plan(Model(), plan({"module": "features", "ops": ["mul", "sum"]})) as h:
            y = h.model(x)
    assert without.dtype == y.dtype == torch.float32
    assert y.item() == pytest.approx(math.exp(-3 * 2.6 ** 2) / 8.0, rel=1e-2)  # 2.6 is 2.5996 in fp16
