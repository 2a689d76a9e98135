"""PA405-PA407, read statically: the dtype of the parameters an optimizer updates, its eps,
and a GradScaler or an fp16 Trainer over fp16 parameters. Each hazard is asserted by rule,
line and path condition; each clean twin and idiomatic correct code gives no finding."""
import os
import textwrap

import pytest

from precisionaudit.core.numerics import rounds_to
from precisionaudit.rules.engine import load_rules
from precisionaudit.frontend.training import audit as audit_file

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "training")
OURS = ("PA405", "PA406", "PA407")
RULES = [r for r in load_rules() if r.id in OURS]


def findings(path):
    return sorted((f.rule, f.line, f.evidence.get("condition")) for f in audit_file(path, RULES))


def audit_code(tmp_path, code):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(code))
    return findings(str(path))


def sample(name):
    return os.path.join(SAMPLES, name)


# ----------------------------------------------------------------------------- samples
@pytest.mark.parametrize("name,expected", [
    ("pa405_low_precision_params_with_scaler_hazard.py",
     [("PA405", 25, "when --amp is set"), ("PA407", 26, None)]),
    ("pa405_trainer_fp16_hazard.py", [("PA405", 8, None)]),
    ("pa406_optimizer_eps_underflow_hazard.py",
     [("PA406", 16, "when --fp16 is set"), ("PA407", 16, "when --fp16 is set")]),
    ("pa407_no_fp32_master_weights_hazard.py", [("PA407", 11, None)]),
])
def test_each_hazard_sample_is_found_at_its_line_under_its_condition(name, expected):
    assert findings(sample(name)) == expected


@pytest.mark.parametrize("name", [
    "pa405_low_precision_params_with_scaler_clean.py", "pa405_trainer_fp16_clean.py",
    "pa406_optimizer_eps_underflow_clean.py", "pa407_no_fp32_master_weights_clean.py"])
def test_each_clean_twin_gives_no_finding(name):
    assert findings(sample(name)) == []


def test_every_message_and_fix_is_filled_with_real_values():
    """Bundled templates are strict: an unknown placeholder would raise here."""
    seen = {}
    for name in sorted(n for n in os.listdir(SAMPLES) if os.path.isfile(sample(n))):
        for f in audit_file(sample(name), RULES):
            seen[f.rule] = f
            assert "{" not in f.message and "{" not in f.fix["to"]
    assert set(seen) == set(OURS)
    assert seen["PA406"].message.startswith(
        "AdamW updates float16 parameters (made float16 at line 25) with the default eps 1e-08, which rounds to 0")
    assert seen["PA406"].message.endswith("(when --fp16 is set)")
    assert "2^-8 = 0.0039 for a weight of 1.0" in seen["PA407"].message
    assert seen["PA406"].severity == "error" and seen["PA407"].severity == "warning"
    pa405 = {f.message for name in os.listdir(SAMPLES) if os.path.isfile(sample(name)) for f in audit_file(sample(name), RULES) if f.rule == "PA405"}
    assert pa405 == {
        "`model.half()` makes the parameters fp16, and they are trained through GradScaler.step(optimizer) at "
        'line 16: GradScaler raises "Attempting to unscale FP16 gradients." at the first step (when --amp is set)',
        "`AutoModelForSequenceClassification.from_pretrained(..., torch_dtype=torch.float16)` makes the parameters "
        "fp16, and they are trained through a Trainer with fp16=True at line 11: GradScaler raises "
        '"Attempting to unscale FP16 gradients." at the first step'}


# ----------------------------------------------------------------------------- PA406 eps
def test_the_eps_limit_is_what_fp16_rounds_to_zero():
    """The rule's premise, checked against numpy's rounding: 2^-25 is 0, just above is not."""
    assert rounds_to(2.0 ** -25, "float16") == 0.0
    assert rounds_to(2.0 ** -25 * 1.01, "float16") > 0.0
    assert rounds_to(1e-8, "bfloat16") > 0.0


@pytest.mark.parametrize("optimizer,eps,fires", [
    ("Adam", None, True), ("AdamW", "1e-8", True), ("RMSprop", None, True), ("Adagrad", None, True),
    ("Adadelta", None, False),           # default 1e-6 survives in fp16 (a subnormal)
    ("Adadelta", "1e-9", True),
    ("Adam", "1e-4", False), ("Adam", "3e-8", False),   # 3e-8 rounds up to 2^-24
    ("Adam", "EPS", True), ("Adam", "EPS * 10", True), ("Adam", "10 ** -7", False),
    ("Adam", "args.eps", False),          # unknown: silence
    ("SGD", None, False),                 # no eps
])
def test_eps_is_judged_as_fp16_stores_it(tmp_path, optimizer, eps, fires):
    extra = f", eps={eps}" if eps else ""
    found = audit_code(tmp_path, f"""
        import torch
        EPS = 1e-9
        def main(args):
            model = Net().cuda().half()
            opt = torch.optim.{optimizer}(model.parameters(), lr=1e-3{extra})
    """)
    assert (("PA406", 6, None) in found) == fires


def test_eps_passed_by_position_and_in_param_groups(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        def main():
            model = Net().half()
            a = torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-4)
            b = torch.optim.Adam([{"params": model.parameters(), "eps": 1e-4}], lr=1e-3)
            c = torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-9)
    """)
    assert [f for f in found if f[0] == "PA406"] == [("PA406", 7, None)]


def test_keyword_arguments_unpacked_from_a_dict_make_eps_and_fused_unknown(tmp_path):
    """nanoGPT: ``extra_args = dict(fused=True) if use_fused else dict()``."""
    found = audit_code(tmp_path, """
        import torch
        def main(use_fused, kwargs):
            model = Net().half()
            extra_args = dict(fused=True) if use_fused else dict()
            a = torch.optim.AdamW(model.parameters(), lr=1e-3, **extra_args)
            b = torch.optim.AdamW(model.parameters(), **kwargs)
    """)
    assert [f for f in found if f[0] == "PA406"] == []


def test_bf16_parameters_never_underflow_eps_but_lose_small_updates(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        def main():
            model = Net().to(dtype=torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-8)
    """)
    assert found == [("PA407", 5, None)]


def test_a_fused_optimizer_is_not_claimed_and_a_fused_flag_becomes_the_condition(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        def main(args):
            model = Net().half()
            a = torch.optim.AdamW(model.parameters(), fused=True)
            b = torch.optim.AdamW(model.parameters(), fused=args.fused)
    """)
    assert [f for f in found if f[0] == "PA406"] == [("PA406", 6, "when args.fused is false")]


# ----------------------------------------------------------------------------- dtype flow
def test_the_dtype_follows_flags_if_branches_and_calls(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        from torch.optim import Adam

        def make(model, cfg):
            return Adam(model.parameters(), lr=cfg.lr)

        def main(args, cfg):
            if args.half_precision:
                dtype = torch.float16
            elif args.bf16:
                dtype = torch.bfloat16
            else:
                dtype = torch.float32
            model = Net()
            model.to("cuda", dtype)
            optimizer = make(model, cfg)
    """)
    # PA407 names the simplest path on which it holds (fp16 here; bf16 is another)
    assert found == [("PA406", 6, "when args.half_precision is true"), ("PA407", 6, "when args.half_precision is true")]


def test_a_submodule_of_a_converted_model_and_a_branch_that_trains_then_returns(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        def main(args):
            model = Net()
            model.config.use_cache = False
            if args.pure_bf16:
                model.bfloat16()
                opt = torch.optim.AdamW(model.encoder.parameters(), lr=1e-4)
                return train(model, opt)
    """)
    assert found == [("PA407", 8, "when args.pure_bf16 is true")]


def test_glide_finetune_converts_its_unet_with_convert_to_fp16(tmp_path):
    """glide-finetune #5: guided-diffusion's ``convert_to_fp16()`` and AdamW's default eps."""
    found = audit_code(tmp_path, """
        import torch
        def run(glide_model, use_fp16, learning_rate):
            if use_fp16:
                glide_model.convert_to_fp16()
            optimizer = torch.optim.AdamW([x for x in glide_model.parameters() if x.requires_grad], lr=learning_rate)
    """)
    assert ("PA406", 6, "when use_fp16 is true") in found


def test_a_conversion_inside_an_if_is_conditional(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        def main(config):
            model = Net()
            if config.pure_fp16:
                model.half()
            opt = torch.optim.Adam(model.parameters())
    """)
    assert ("PA406", 7, "when config.pure_fp16 is true") in found


@pytest.mark.parametrize("code", [
    # an inference copy only
    """
    model = Net()
    ema = copy.deepcopy(model).half()
    opt = torch.optim.Adam(model.parameters())
    """,
    # fp16 for inference, no optimizer
    """
    model = Net().half().eval()
    out = model(x)
    """,
    # converted back before the optimizer
    """
    model = Net().half()
    model.float()
    opt = torch.optim.Adam(model.parameters())
    """,
    # a PEFT wrapper: the trained adapters are not the converted weights
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)
    model = get_peft_model(model, config)
    opt = torch.optim.AdamW(model.parameters())
    """,
    # quantized loading
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16, load_in_8bit=True)
    opt = torch.optim.AdamW(model.parameters())
    """,
    # a new fp32 head after the conversion, parameters frozen in a loop
    """
    model = Net().half()
    for p in model.parameters():
        p.requires_grad = False
    model.head = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.head.parameters())
    """,
    # the dtype is a value the analysis cannot know
    """
    model = Net().to(getattr(torch, args.dtype))
    opt = torch.optim.AdamW(model.parameters())
    """,
    # converted only after training, for export
    """
    model = Net()
    opt = torch.optim.AdamW(model.parameters())
    train(model, opt)
    model.half()
    """,
    # DeepSpeed keeps fp32 master weights for the optimizer it is given
    """
    model = Net().half()
    optimizer = torch.optim.AdamW(model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")
    """,
    # accelerate may run DeepSpeed from its config
    """
    model = AutoModelForCausalLM.from_pretrained("x", dtype=torch.bfloat16)
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
    """,
    # transformers' PEFT integration: the trained parameters are the adapter's
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)
    model.add_adapter(lora_config)
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters())
    """,
    # converted in an evaluation branch that returns
    """
    model = Net()
    if args.eval_only:
        model.half()
        evaluate(model)
        return
    opt = torch.optim.AdamW(model.parameters())
    """,
    # diffusers: frozen, converted, LoRA added, trainable parameters cast back to fp32
    """
    unet.requires_grad_(False)
    unet.to("cuda", dtype=torch.float16)
    cast_training_params(unet, dtype=torch.float32)
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, unet.parameters()))
    """,
    # tensors, not the model, are halved
    """
    model = Net()
    x = x.half()
    opt = torch.optim.Adam(model.parameters())
    """,
])
def test_idiomatic_or_unknown_code_gives_no_finding(tmp_path, code):
    body = textwrap.indent(textwrap.dedent(code), "    ")
    assert audit_code(tmp_path, "import copy\nimport torch\nfrom transformers import AutoModelForCausalLM\n"
                                f"def main(args, x, config, unet):\n{body}") == []


LIGHTNING = """
    import lightning as L
    import torch

    class LitModel(L.LightningModule):
        def configure_optimizers(self):
            return torch.optim.AdamW(self.model.parameters(), lr=1e-4)

    def main(args):
        trainer = L.Trainer(precision={precision}, max_epochs=1{strategy})
        trainer.fit(LitModel())
"""


@pytest.mark.parametrize("precision,strategy,expected", [
    ('"bf16-true"', "", [("PA407", 7, None)]),
    ('"16-true"', "", [("PA406", 7, None), ("PA407", 7, None)]),
    ('"bf16-true" if args.pure else "bf16-mixed"', ', strategy="ddp"', [("PA407", 7, "when args.pure is true")]),
    ('"bf16-mixed"', "", []),                      # fp32 weights under autocast
    ('"16-mixed"', "", []),
    ('"bf16-true"', ', strategy="deepspeed_stage_2"', []),   # DeepSpeed brings its own precision
])
def test_lightning_true_precisions_train_the_modules_own_low_precision_weights(tmp_path, precision, strategy, expected):
    """Lightning converts the module (HalfPrecision.convert_module) before configure_optimizers."""
    assert audit_code(tmp_path, LIGHTNING.format(precision=precision, strategy=strategy)) == expected


# ----------------------------------------------------------------------------- PA405
def test_a_scaler_on_self_with_a_deprecated_import_alias(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        from torch.cuda.amp import GradScaler as GS

        class Trainer:
            def __init__(self, model):
                self.model = model.to(torch.float16)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.scaler = GS()

            def optimizer_step(self):
                self.scaler.unscale_(self.optimizer)
                self.scaler.step(self.optimizer)
                self.scaler.update()
    """)
    assert ("PA405", 7, None) in found


def test_scaler_enabled_only_for_fp16_is_decided_from_the_dtype(tmp_path):
    """``GradScaler(enabled=(dtype == torch.float16))``: the hazard holds exactly when args.fp16 is."""
    found = audit_code(tmp_path, """
        import torch
        def main(args):
            dtype = torch.float16 if args.fp16 else torch.bfloat16
            model = Net().to(dtype)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda", enabled=(dtype == torch.float16))
            scaler.step(opt)
    """)
    assert [f for f in found if f[0] == "PA405"] == [("PA405", 5, "when args.fp16 is true")]


def test_a_flag_copied_into_a_name_is_named_as_the_flag(tmp_path):
    """As argparse spells it, where the script declares it."""
    found = audit_code(tmp_path, """
        import argparse
        import torch
        def main(args):
            use_amp = args.amp
            model = Net().half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler(enabled=use_amp)
            scaler.step(opt)
        parser = argparse.ArgumentParser()
        parser.add_argument("--amp", action="store_true")
        main(parser.parse_args())
    """)
    assert [f for f in found if f[0] == "PA405"] == [("PA405", 6, "when --amp is set")]


@pytest.mark.parametrize("scaler", [
    'torch.amp.GradScaler("cuda", enabled=False)',
    "ShardedGradScaler()",
])
def test_a_disabled_or_sharded_scaler_does_not_raise(tmp_path, scaler):
    found = audit_code(tmp_path, f"""
        import torch
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        def main():
            model = Net().half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = {scaler}
            scaler.step(opt)
    """)
    assert [f for f in found if f[0] == "PA405"] == []


def test_a_fused_optimizer_steps_without_unscale_but_an_explicit_unscale_raises(tmp_path):
    code = """
        import torch
        def main():
            model = Net().half()
            opt = torch.optim.AdamW(model.parameters(), fused=True)
            scaler = torch.amp.GradScaler()
            scaler.step(opt)
    """
    assert [f for f in audit_code(tmp_path, code) if f[0] == "PA405"] == []
    code += "        scaler.unscale_(opt)\n"
    assert [f for f in audit_code(tmp_path, code) if f[0] == "PA405"] == [("PA405", 4, None)]


def test_a_trainer_with_deepspeed_or_without_fp16_is_not_reported(tmp_path):
    found = audit_code(tmp_path, """
        import torch
        from transformers import AutoModel, Trainer, TrainingArguments
        from trl import SFTTrainer
        def main(args, lora):
            model = AutoModel.from_pretrained("x", dtype=torch.float16)
            a = Trainer(model=model, args=TrainingArguments("o", fp16=True, deepspeed="ds.json"))
            b = Trainer(model=model, args=TrainingArguments("o", bf16=True))
            c = Trainer(model, TrainingArguments("o", fp16=args.fp16))
            d = SFTTrainer(model=model, args=TrainingArguments("o", fp16=True), peft_config=lora)
    """)
    assert found == [("PA405", 6, "when args.fp16 is true")]


def test_a_file_none_of_these_checks_can_fire_on_is_not_parsed(tmp_path, monkeypatch):
    """The textual gate: no LibCST parse (nor metadata) for a file that builds no optimizer
    over a low dtype, names no GradScaler and no fp16 Trainer."""
    from precisionaudit.training import source

    monkeypatch.setattr(source, "read_script", lambda path: pytest.fail("parsed"))
    assert audit_code(tmp_path, """
        import torch
        model = Net()
        opt = torch.optim.Adam(model.parameters())
    """) == []


def test_a_skipped_file_that_does_not_parse_is_still_reported(tmp_path):
    from precisionaudit.core.errors import UsageError

    path = tmp_path / "broken.py"
    path.write_text("import torch\n\ndef f(:\n    pass\n")
    with pytest.raises(UsageError, match=r"broken\.py:\d+:\d+: cannot parse"):
        audit_file(str(path), RULES)


def test_a_generated_file_of_50000_lines_is_skipped_not_hung_on(tmp_path, monkeypatch):
    from precisionaudit.training import source

    monkeypatch.setattr(source, "read_script", lambda path: pytest.fail("parsed"))
    body = "".join(f"def f{i}(model):\n    model.half()\n    return torch.optim.SGD(model.parameters(), lr=1)\n"
                   for i in range(16_700))
    assert audit_code(tmp_path, "import torch\n" + body) == []


def test_auditing_a_training_script_imports_no_torch():
    """The pre-commit hook's promise: a training script is read, never run, and torch is
    never imported (numpy rounds eps)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from precisionaudit.rules.engine import load_rules\n"
            "from precisionaudit.frontend.training import audit as audit_file\n"
            "rules = [r for r in load_rules(checks=False) if r.id in ('PA405', 'PA406', 'PA407')]\n"
            f"found = audit_file({sample('pa406_optimizer_eps_underflow_hazard.py')!r}, rules)\n"
            "print(sorted(f.rule for f in found), 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['PA406', 'PA407'] False"


def test_an_optimizer_over_fp32_copies_of_half_parameters_is_silent(tmp_path):
    """The PyTorch forum's fix for Adam + half NaNs: fp32 master copies made in a
    comprehension; Adam updates those, so neither eps nor lost updates apply."""
    path = tmp_path / "master.py"
    path.write_text(
        "import torch\n"
        "def train(net):\n"
        "    net = net.half()\n"
        "    master = [p.detach().clone().float().requires_grad_(True) for p in net.parameters()]\n"
        "    opt = torch.optim.Adam(master, lr=1e-3)\n"
        "    half = [p for p in net.parameters()]\n"
        "    opt2 = torch.optim.Adam(half, lr=1e-3)\n")
    found = {(f.rule, f.line) for f in audit_file(str(path), RULES)}
    assert found == {("PA406", 7), ("PA407", 7)}
