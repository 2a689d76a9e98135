"""check --train (the engine, ``train_check``): real optimizer steps in fp32, in the target
precision and with a plan, on small models built here. Each demonstration: the baseline
fails, the finding names the module at fault, ``training_plan`` writes the entries that fix
it, and the planned run trains like fp32."""
from __future__ import annotations

import math

import pytest
import torch

from precisionaudit.check.pytorch.training import train_check
from precisionaudit.core.errors import UsageError
from precisionaudit.core.target import Target
from precisionaudit.plan.file import PlanError, dump_plan, parse_plan, parse_text
from precisionaudit.plan.training import training_plan

PURE_BF16, PURE_FP16 = Target("bfloat16", "pure"), Target("float16", "pure")
AUTOCAST_FP16 = Target("float16", "autocast")


class NormNet(torch.nn.Module):
    """A Llama-style block: linear, RMSNorm (a gain of 1.0, no bias), linear; GPT-2's init."""

    def __init__(self):
        super().__init__()
        self.inp, self.norm, self.out = torch.nn.Linear(16, 64), torch.nn.RMSNorm(64), torch.nn.Linear(64, 4)
        for m in (self.inp, self.out):
            torch.nn.init.normal_(m.weight, std=0.02)
            torch.nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.out(self.norm(self.inp(x)))


class EmbeddingNet(torch.nn.Module):
    """A vocabulary of 64 of which the batch uses 16 tokens: the other rows get gradient 0."""

    def __init__(self):
        super().__init__()
        self.emb, self.out = torch.nn.Embedding(64, 16), torch.nn.Linear(16, 8)

    def forward(self, ids):
        return self.out(self.emb(ids))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def _rules(findings):
    return sorted({(f.rule, f.module) for f in findings})


def _prove(report, model, batch, target, **kwargs):
    """The plan ``training_plan`` writes from the report's findings, checked again."""
    plan = training_plan(report.findings, target.as_dict())
    reparsed = parse_text(dump_plan(plan), "amp_plan.yaml")  # what plan --train would write
    return plan, train_check(model, batch, target, plan=reparsed, **kwargs)


# --------------------------------------------------------------------------- demonstrations
def test_pure_bf16_norm_weights_never_move_at_lr_1e_4_and_keeping_the_norm_fp32_fixes_it():
    x = _x(8, 16)
    report = train_check(NormNet, x, PURE_BF16, steps=8, lr=1e-4)
    base = report.variant("baseline")
    gain = next(p for p in base["parameters"] if p["parameter"] == "norm.weight")
    assert gain["updates_lost"] == 1.0 and gain["never_moved"] == 1.0
    assert gain["drift"] == 1.0  # exactly where it started: every weight is still 1.0
    assert base["status"] == "diverges" and not report.passed
    (finding,) = [f for f in report.findings if f.rule == "PA304"]
    assert finding.module == "norm" and finding.severity == "error"
    assert finding.evidence["lr"] == 1e-4 and finding.evidence["weight_abs"] == 1.0
    assert finding.evidence["half_ulp"] == 2.0 ** -8  # half an ulp of 1.0 in bfloat16: 0.0039
    assert "0.0039" in finding.message and "lr 0.0001" in finding.message

    plan, proved = _prove(report, NormNet, x, PURE_BF16, steps=8, lr=1e-4)
    assert plan.keep_fp32_modules == ["norm"] and plan.master_weights is None
    planned = proved.variant("planned")
    assert planned["status"] == "ok" and proved.passed and not planned["findings"]
    assert next(m for m in planned["modules"] if m["module"] == "norm")["drift"] < 0.1


def test_fp16_adam_eps_1e_8_rounds_to_0_and_unused_embedding_rows_go_nan():
    """adam.py: ``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`` in fp16 is
    0 where exp_avg_sq is 0 (1e-8 is below half of fp16's smallest subnormal, 5.96e-8), and
    ``param.addcdiv_(exp_avg, denom)`` then divides 0 by 0."""
    ids = torch.randint(0, 16, (4, 8), generator=torch.Generator().manual_seed(0))
    report = train_check(EmbeddingNet, ids, PURE_FP16, steps=6)
    base = report.variant("baseline")
    assert base["status"] == "nonfinite" and base["first_nonfinite"]["step"] == 0
    assert base["first_nonfinite"]["module"] == "emb"
    eps = [f for f in report.findings if f.rule == "PA305" and f.evidence["case"] == "eps"]
    assert [f.module for f in eps] == ["emb"] and eps[0].evidence["eps"] == 1e-8
    assert eps[0].severity == "error"

    plan, proved = _prove(report, EmbeddingNet, ids, PURE_FP16, steps=6)
    assert plan.master_weights == "float32"
    planned = proved.variant("planned")
    assert planned["status"] == "ok" and planned["optimizer_state_dtype"] == "float32"
    assert not planned["findings"]


def test_fp16_exp_avg_sq_underflow_makes_eps_the_step_size_and_master_weights_fix_it():
    """Gradients below ~7.7e-3 give (1 - 0.999) * g^2 below fp16's range: exp_avg_sq is 0 and
    with eps=1e-6 (which fp16 holds) the step is g / 1e-6 times lr: 100x too large."""
    x = _x(16, 32)
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-4, eps=1e-6)  # noqa: E731
    report = train_check(MLP, x, PURE_FP16, steps=8, optimizer_factory=adamw)
    base = report.variant("baseline")
    assert base["status"] == "diverges" and base["drift"] > 10
    underflow = {f.module: f for f in report.findings if f.rule == "PA305"}
    assert set(underflow) == {"a", "b"}
    assert all(f.evidence["case"] == "diverged" and f.evidence["share"] > 0.9 for f in underflow.values())

    plan, proved = _prove(report, MLP, x, PURE_FP16, steps=8, optimizer_factory=adamw)
    assert plan.master_weights == "float32"
    assert proved.variant("planned")["status"] == "ok" and proved.passed


def _tiny_loss(outputs, inputs):
    return outputs.float().pow(2).mean() * 1e-4  # a small loss: gradients near 1e-9


def test_fp16_autocast_without_a_scaler_flushes_gradients_and_a_loss_scale_fixes_it():
    x = _x(64, 32)
    report = train_check(MLP, x, AUTOCAST_FP16, steps=8, lr=1e-3, loss_fn=_tiny_loss, scaler=False)
    base = report.variant("baseline")
    assert base["status"] == "diverges" and base["loss_scale"] is None
    flushed = {f.module: f for f in report.findings if f.rule == "PA306"}
    assert "a" in flushed and flushed["a"].evidence["scale"] == 1.0
    assert flushed["a"].evidence["share"] > 0.5  # most of the first layer's gradient is 0
    assert base["grad_underflow_at_scale"]["zero"] > 0.3  # of all fp32 gradients, activations' too

    plan, proved = _prove(report, MLP, x, AUTOCAST_FP16, steps=8, lr=1e-3, loss_fn=_tiny_loss, scaler=False)
    assert plan.loss_scale == {"init": report.gradients["recommended_init_scale"]}
    planned = proved.variant("planned")
    assert planned["status"] == "ok" and not planned["findings"]
    assert planned["loss_scale"]["init"] == plan.loss_scale["init"] and not planned["loss_scale"]["skipped_steps"]
    assert planned["grad_underflow_at_scale"]["zero"] < 0.01


def test_the_same_model_with_the_default_grad_scaler_is_clean():
    report = train_check(MLP, _x(64, 32), AUTOCAST_FP16, steps=8, lr=1e-3, loss_fn=_tiny_loss)
    base = report.variant("baseline")
    assert base["loss_scale"]["init"] == 65536.0 and base["status"] == "ok"
    assert report.passed and not report.findings


def test_the_real_grad_scaler_skips_steps_whose_gradients_overflow_and_backs_off():
    """torch.amp.GradScaler("cpu"): a scaled gradient past 65504 in fp16 is inf, the step is
    skipped and the scale halves, until it fits; PA306 reports steps skipped at the start
    only when they are many (here: every step of a short run)."""
    big = lambda outputs, inputs: outputs.float().pow(2).mean() * 1e3  # noqa: E731
    report = train_check(MLP, _x(64, 32), AUTOCAST_FP16, steps=4, lr=1e-3, loss_fn=big)
    scaler = report.variant("baseline")["loss_scale"]
    skipped = scaler["skipped_steps"]
    assert skipped[:1] == [0]
    for i, scale in enumerate(scaler["trajectory"][1:], 1):  # backoff 0.5 after each skip
        assert scale == scaler["trajectory"][i - 1] * (0.5 if i - 1 in skipped else 1.0)
    if len(skipped) == 4:
        assert any(f.rule == "PA306" and f.evidence["case"] == "skipped" for f in report.findings)


# --------------------------------------------------------------------------- the plan file
def test_plan_file_reads_and_writes_the_training_entries():
    plan = parse_plan({"version": 1, "master_weights": "float32", "loss_scale": {"init": 1024},
                       "keep_fp32_modules": ["norm"]}, "p.yaml")
    assert plan.master_weights == "float32" and plan.loss_scale == {"init": 1024.0}
    assert parse_text(dump_plan(plan), "p.yaml").to_dict() == plan.to_dict()
    assert "master_weights" not in parse_plan({"version": 1}, "p.yaml").to_dict()


@pytest.mark.parametrize("entry,message", [
    ({"master_weights": "float16"}, "master_weights 'float16' is not supported"),
    ({"loss_scale": {"init": 0}}, "loss_scale init 0 is not a positive number"),
    ({"loss_scale": {"init": 8, "growth": 2}}, "loss_scale: unknown key 'growth'"),
    ({"loss_scale": 65536}, "loss_scale must be a mapping"),
])
def test_plan_file_refuses_bad_training_entries(entry, message):
    with pytest.raises(PlanError, match=message):
        parse_plan({"version": 1, **entry}, "p.yaml")


def test_a_loss_scale_in_pure_fp16_needs_master_weights():
    with pytest.raises(UsageError, match="GradScaler refuses float16 gradients"):
        train_check(MLP, _x(4, 32), PURE_FP16, steps=1, plan={"version": 1, "loss_scale": {"init": 1024}})


# --------------------------------------------------------------------------- bad input
class Frozen(MLP):
    def __init__(self):
        super().__init__()
        self.requires_grad_(False)


def _raises(params):
    raise RuntimeError("no optimizer today")


@pytest.mark.parametrize("kwargs,message", [
    ({"steps": 0}, "--steps must be a whole number of at least 1 \\(got 0\\)"),
    ({"lr": -1.0}, "--lr must be a positive number"),
    ({"optimizer_factory": _raises}, "get_optimizer\\(params\\) raised RuntimeError: no optimizer today"),
    ({"optimizer_factory": lambda params: "sgd"}, "get_optimizer\\(params\\) returned str, not an optimizer"),
    ({"optimizer_factory": lambda params: torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1)},
     "an optimizer over other tensors than the params"),
    ({"loss_fn": lambda outputs, inputs: outputs.float()}, "the loss is not a scalar \\(shape \\(4, 16\\)"),
    ({"loss_fn": lambda outputs, inputs: 1.0}, "the loss is a float, not a scalar tensor"),
    ({"optimizer_factory": lambda params: torch.optim.SGD(params, lr=1e30),
      "loss_fn": lambda outputs, inputs: outputs.float().pow(2).mean()},
     "the fp32 reference diverges \\(.* is inf/NaN at step [01]\\): not a precision problem"),
])
def test_bad_input_is_one_usage_error_line(kwargs, message):
    with pytest.raises(UsageError, match=message) as info:
        train_check(MLP, _x(4, 32), AUTOCAST_FP16, **{"steps": 2, **kwargs})
    assert "\n" not in str(info.value)


def test_a_model_without_trainable_parameters_is_bad_input():
    with pytest.raises(UsageError, match="no trainable parameters"):
        train_check(Frozen, _x(4, 32), AUTOCAST_FP16, steps=1)


def test_a_loss_that_is_nan_in_fp32_is_the_reference_diverging():
    with pytest.raises(UsageError, match="the fp32 reference diverges \\(its loss is inf/NaN at step 0\\)"):
        train_check(MLP, _x(4, 32), AUTOCAST_FP16, steps=1,
                    loss_fn=lambda outputs, inputs: outputs.float().mean() * math.nan)


# --------------------------------------------------------------------------- a real architecture
def test_gpt2_from_its_transformers_config_in_pure_bf16_at_a_fine_tuning_lr():
    """At lr 1e-5 a bf16 weight of GPT-2's init (|w| ~ 0.02, half an ulp 6e-5) and every
    LayerNorm gain (1.0, half an ulp 0.0039) keep almost none of AdamW's updates; fp32
    master weights keep them all."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=128, n_positions=16, n_embd=64, n_layer=1, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids}  # the output's .loss is the loss
    make = lambda: transformers.GPT2LMHeadModel(config)  # noqa: E731
    report = train_check(make, batch, PURE_BF16, steps=4, lr=1e-5)
    assert report.variant("baseline")["status"] == "diverges"
    lost = {f.module: f for f in report.findings if f.rule == "PA304"}
    norms = {"transformer.h.0.ln_1", "transformer.h.0.ln_2", "transformer.ln_f"}
    assert norms <= set(lost) and "transformer.h.0.attn.c_attn" in lost
    assert all(lost[n].severity == "error" and lost[n].evidence["weight_abs"] == 1.0 for n in norms)
    assert lost["transformer.h.0.attn.c_attn"].evidence["share"] > 0.5

    plan, proved = _prove(report, make, batch, PURE_BF16, steps=4, lr=1e-5)
    assert plan.master_weights == "float32" and plan.keep_fp32_modules == []
    planned = proved.variant("planned")
    assert planned["status"] == "ok" and not planned["findings"]
    assert all(m["updates_lost"] == 0.0 for m in planned["modules"])


# --------------------------------------------------------------------------- plan --train
def _finding(rule, module, entries):
    from precisionaudit.core.findings import Finding
    return Finding(rule=rule, name="x", severity="error", path="m.py", line=None, model="m.py:get_model",
                   node=None, op="weight", module=module, message="m", fix={"action": "edit", "plan": entries})


def test_training_plan_merges_the_entries_master_weights_making_kept_norms_redundant():
    target = {"dtype": "float16", "mode": "pure", "device": "cuda"}
    norms = [_finding("PA304", "ln_1", {"keep_fp32_modules": ["ln_1"]}),
             _finding("PA304", "ln_2", {"keep_fp32_modules": ["ln_2"]})]
    assert training_plan(norms, target).keep_fp32_modules == ["ln_1", "ln_2"]
    both = training_plan([*norms, _finding("PA305", "emb", {"master_weights": "float32"})], target)
    assert both.master_weights == "float32" and both.keep_fp32_modules == []
    scaled = training_plan([_finding("PA306", "a", {"loss_scale": {"init": 1024.0}}),
                            _finding("PA306", "", {"loss_scale": {"init": 4096.0}})], target)
    assert scaled.loss_scale == {"init": 4096.0}
    assert training_plan([_finding("PA106", "attn", {"keep_fp32_modules": ["attn"]})], target).to_dict() \
        == {"version": 1, "target": target, "overrides": []}  # not a training finding


def test_bf16_autocast_training_is_clean():
    """Autocast keeps fp32 weights and optimizer state, and bf16 has fp32's range: none of
    PA304-PA306 can apply, and none is reported."""
    report = train_check(NormNet, _x(8, 16), Target("bfloat16", "autocast"), steps=6, lr=1e-4)
    base = report.variant("baseline")
    assert base["status"] == "ok" and base["optimizer_state_dtype"] == "float32" and base["loss_scale"] is None
    assert report.passed and not report.findings
